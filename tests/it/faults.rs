//! Faults with real processes: the daemon SIGKILLed under load, a multiplexer that hangs, a real
//! tmux server stopped with SIGSTOP, the wake dir on a full file system (a 64 KiB tmpfs, or a
//! file-size rlimit where mounting is refused), and a drainer stuck holding a session's lock.
//! The SIGKILL loop takes about a minute in a debug build on the project's busy two cores, the
//! others well under 30 s; every test's guards stop each process, tmux server and mount it
//! started, pass or fail.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::common;
use crate::common::harness::{Daemon, TestServer, post_hook as post, record_delivered};
use crate::common::process::process_is_running;
use crate::common::timeout::{OnTimeout, on_timeout};
use crate::common::tmux::TmuxServer;

/// The bus gives a webhook 5 s; every answer under fault must come well inside it.
const BUS_BUDGET: Duration = Duration::from_secs(5);
/// Kill/restart rounds in the crash test.
const KILL_ROUNDS: u64 = 50;
/// Sessions the load spreads over, and concurrent clients posting.
const LOAD_SESSIONS: u64 = 12;
const LOAD_CLIENTS: u64 = 16;
/// Payload sizes cycled by the load: one-line events up to lines of many pages (a kill inside
/// their write(2) leaves part of them in the file).
const LOAD_PAYLOADS: [usize; 5] = [40, 700, 4_000, 12_000, 100_000];
/// Acknowledged bodies re-sent after each restart, as if their answers had been lost; and, per
/// kill, the requests sent just before it that the final instance is asked again.
const RETRIED_ACKS: usize = 25;
/// The most recent acknowledged bodies the final instance is also asked again.
const RECENT_RETRIES: usize = 100;
/// Deliveries recorded between the last kill and the final start, as a busy stretch leaves
/// them: more than the 65 536 newest rows the start-up read before issue 28, so every earlier
/// identity is outside what that read would have restored.
const BUSY_STRETCH: u64 = 70_000;
/// Retries in flight at once at the end (a bus posts a few at a time, not 1 350).
const FINAL_CONCURRENCY: usize = 16;
/// The load writes about 23 kB an event, some 11 000 events over the kills: near the spool's
/// default 256 MiB cap, past which the pruner deletes the oldest spools whole (and their lines
/// with them). Durability is under test here, not pruning: lift the cap well clear.
const NO_PRUNING_CAP: (&str, &str) = ("WAKEBRIDGE_PRUNE__MAX_TOTAL_BYTES", "17179869184");
/// Size of the tmpfs the full-disk test mounts.
const SMALL_FS: &str = "size=64k";
/// The per-file size limit of the file-size test: room for the ledger's WAL while it migrates
/// through every schema step at start (seven steps outgrew 64 KiB, fourteen 128 KiB). The WAL
/// takes each round's line bytes too, so it reaches the limit after the first events: the
/// spool then runs in its fallback (session files synced one by one), as on a full disk.
const FSIZE_LIMIT: u64 = 256 * 1024;
/// An event bigger than one page, so appending it always needs a fresh block.
const BIG_PAYLOAD: usize = 8 * 1024;
/// The spool's lock budget (spool::LOCK_BUDGET) and the slack allowed around it.
const LOCK_BUDGET: Duration = Duration::from_secs(2);

fn body(sid: &str, event_id: u64, payload_len: usize) -> String {
    json!({
        "event_id": event_id,
        "event_type": "help_needed",
        "payload": "p".repeat(payload_len),
        "session_id": "sender",
        "timestamp": "2026-11-30T10:57:47.114154",
        "channel": format!("session:{sid}"),
        "correlation_id": null,
        "signal_level": "actionable",
    })
    .to_string()
}

/// Every line of `sid`'s spool, each parsed; panics on a torn or unparseable line.
fn spool_events(wake: &Path, sid: &str) -> Vec<Value> {
    let path = wake.join(format!("{sid}.jsonl"));
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Vec::new();
    };
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "{} ends in a torn line: {:?}",
        path.display(),
        &text[text.len().saturating_sub(80)..]
    );
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str(line).unwrap_or_else(|e| {
                panic!(
                    "{} line {} does not parse ({e}): {:?}",
                    path.display(),
                    i + 1,
                    &line[..line.len().min(120)]
                )
            })
        })
        .collect()
}

/// What the load saw of one request: its body's parts, and whether its answer arrived.
#[derive(Clone)]
struct Sent {
    sid: String,
    size: usize,
    /// The daemon answered 200 "delivered" (with this action).
    action: Option<String>,
}

/// Each session's spool, read from where the last check stopped: the ids of the new lines.
/// Panics on a torn or unparseable line: after a restart every tail must be whole.
fn new_spool_ids(wake: &Path, sid: &str, checked: &mut u64) -> Vec<u64> {
    let path = wake.join(format!("{sid}.jsonl"));
    let Ok(bytes) = std::fs::read(&path) else {
        return Vec::new();
    };
    let new = &bytes[usize::try_from(*checked).expect("offset")..];
    assert!(
        new.is_empty() || new.ends_with(b"\n"),
        "{} ends in a torn line after the restart: {:?}",
        path.display(),
        String::from_utf8_lossy(&new[new.len().saturating_sub(80)..])
    );
    *checked = bytes.len() as u64;
    std::str::from_utf8(new)
        .expect("utf8")
        .lines()
        .map(|line| {
            let event: Value = serde_json::from_str(line).unwrap_or_else(|e| {
                panic!("{} has a line that does not parse ({e})", path.display())
            });
            assert_eq!(event["channel"], format!("session:{sid}"));
            event["event_id"].as_u64().expect("event_id")
        })
        .collect()
}

/// The contract after a crash: a killed daemon may leave part of a line at a spool's end (a
/// process killed inside write(2) keeps the pages it had copied), so drainers ignore an
/// unterminated last line; the next start repairs every tail before it serves. From then on
/// every event the daemon answered 200 is in its spool exactly once, and every retry of a body
/// whose line reached the spool, whether or not its answer got out, is recognised: the same
/// answer, `duplicate: true`, nothing appended. Not only by the next instance: at the end, after
/// a busy stretch of more deliveries than the dedupe memory once held, the final instance is
/// asked again for the last requests before every kill and the most recent ones (issue 28).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_under_load_again_and_again_loses_nothing_and_spools_no_retry_twice() {
    let root = common::tempdir();
    let wake = root.path().join("wake");
    let client = reqwest::Client::new();
    let next_id = Arc::new(AtomicU64::new(1));
    // Every request sent, by event id.
    let sent: Arc<Mutex<BTreeMap<u64, Sent>>> = Arc::default();
    let mut checked: HashMap<String, u64> = HashMap::new();
    let mut spooled: HashMap<u64, usize> = HashMap::new();
    let mut retried = 0usize;
    let mut retried_at_the_end = 0usize;
    // Per kill, the ids of the last requests sent before it.
    let mut before_kill: Vec<Vec<u64>> = Vec::new();
    for round in 0..=KILL_ROUNDS {
        if round == KILL_ROUNDS {
            let busy = (0..BUSY_STRETCH).map(|i| hex::encode(Sha256::digest(format!("busy {i}"))));
            record_delivered(root.path(), "busy", busy).await;
        }
        let mut daemon = Daemon::spawn(root.path(), &[NO_PRUNING_CAP], None);
        daemon.wait_ready(&client).await;
        // The restart repaired every tail: nothing torn, nothing doubled, nothing lost.
        for s in 0..LOAD_SESSIONS {
            let sid = format!("load-{s}");
            let offset = checked.entry(sid.clone()).or_default();
            for id in new_spool_ids(&wake, &sid, offset) {
                *spooled.entry(id).or_default() += 1;
            }
        }
        let snapshot = sent.lock().expect("sent").clone();
        for (id, request) in &snapshot {
            let count = spooled.get(id).copied().unwrap_or(0);
            assert!(
                count <= 1,
                "round {round}: event {id} spooled {count} times"
            );
            if request.action.is_some() {
                assert_eq!(
                    count, 1,
                    "round {round}: event {id} was answered 200 but is not in its spool"
                );
            }
        }
        // What a bus resends: every request whose answer it never saw, and (as if those answers
        // had been lost on the way) the last acknowledged ones.
        let unanswered = snapshot.iter().filter(|(_, r)| r.action.is_none());
        let last_acked = snapshot
            .iter()
            .rev()
            .filter(|(_, r)| r.action.is_some())
            .take(RETRIED_ACKS);
        let retries = unanswered.chain(last_acked).map(|(id, request)| {
            let (client, addr) = (&client, &daemon.addr);
            async move {
                let answer = post(client, addr, body(&request.sid, *id, request.size)).await;
                (*id, request, answer)
            }
        });
        for (id, request, (status, answer, _)) in futures::future::join_all(retries).await {
            let was_spooled = spooled.contains_key(&id);
            assert_eq!(status, 200, "round {round}: retry of {id}: {answer}");
            assert_eq!(
                answer["duplicate"].as_bool().unwrap_or(false),
                was_spooled,
                "round {round}: retry of event {id} (spooled: {was_spooled}): {answer}"
            );
            if let Some(action) = &request.action {
                assert_eq!(
                    answer["action"],
                    action.as_str(),
                    "round {round}: retry of {id}"
                );
            }
            sent.lock()
                .expect("sent")
                .get_mut(&id)
                .expect("sent")
                .action = answer["action"].as_str().map(str::to_string);
            retried += 1;
        }
        // The retries were answered: each of those events is in its spool exactly once now.
        for s in 0..LOAD_SESSIONS {
            let sid = format!("load-{s}");
            let offset = checked.get_mut(&sid).expect("checked");
            for id in new_spool_ids(&wake, &sid, offset) {
                *spooled.entry(id).or_default() += 1;
            }
        }
        for (id, _) in sent.lock().expect("sent").iter() {
            assert_eq!(
                spooled.get(id),
                Some(&1),
                "round {round}: event {id} after its retry"
            );
        }
        if round == KILL_ROUNDS {
            retried_at_the_end =
                retry_on_the_final_instance(&client, &daemon, &sent, &before_kill).await;
            for s in 0..LOAD_SESSIONS {
                let sid = format!("load-{s}");
                let offset = checked.get_mut(&sid).expect("checked");
                let appended = new_spool_ids(&wake, &sid, offset);
                assert!(
                    appended.is_empty(),
                    "the final instance appended retries of {appended:?} to {sid}"
                );
            }
            break;
        }
        let first_of_round = next_id.load(Ordering::Relaxed);
        let stop = Arc::new(AtomicBool::new(false));
        let clients: Vec<_> = (0..LOAD_CLIENTS)
            .map(|c| {
                let (client, addr) = (client.clone(), daemon.addr.clone());
                let (stop, next_id, sent) = (stop.clone(), next_id.clone(), sent.clone());
                tokio::spawn(async move {
                    let mut n = c as usize;
                    while !stop.load(Ordering::Relaxed) {
                        let id = next_id.fetch_add(1, Ordering::Relaxed);
                        let sid = format!("load-{}", (c + id) % LOAD_SESSIONS);
                        let size = LOAD_PAYLOADS[n % LOAD_PAYLOADS.len()];
                        n += 1;
                        let request = Sent {
                            sid: sid.clone(),
                            size,
                            action: None,
                        };
                        sent.lock().expect("sent").insert(id, request);
                        let (status, answer, _) = post(&client, &addr, body(&sid, id, size)).await;
                        if status == 200 && answer["status"] == "delivered" {
                            sent.lock()
                                .expect("sent")
                                .get_mut(&id)
                                .expect("sent")
                                .action = answer["action"].as_str().map(str::to_string);
                        } else if status == 0 {
                            // The daemon is gone; stop hammering a closed port.
                            break;
                        }
                    }
                })
            })
            .collect();
        // Kill at a different moment each round (100 to 400 ms into the load).
        tokio::time::sleep(Duration::from_millis(100 + (round * 37) % 300)).await;
        daemon.sigkill();
        stop.store(true, Ordering::Relaxed);
        for c in clients {
            c.await.expect("load client");
        }
        let last_of_round = next_id.load(Ordering::Relaxed);
        before_kill.push(
            (first_of_round..last_of_round)
                .rev()
                .take(RETRIED_ACKS)
                .collect(),
        );
    }
    let sent = sent.lock().expect("sent");
    let acked = sent.values().filter(|r| r.action.is_some()).count();
    assert!(
        acked as u64 >= KILL_ROUNDS * 10,
        "only {acked} events acknowledged over {KILL_ROUNDS} kills; the load did not run"
    );
    eprintln!(
        "crash test: {} events sent, {acked} acknowledged, {retried} retried over {KILL_ROUNDS} kills, {retried_at_the_end} on the final instance after {BUSY_STRETCH} more deliveries",
        sent.len()
    );
}

/// The end of the crash test: re-posts to the final instance, byte for byte, the bodies of the
/// last requests before each kill and the most recent acknowledged ones; each must be answered
/// as a redelivery with its first action. Returns how many were re-posted.
async fn retry_on_the_final_instance(
    client: &reqwest::Client,
    daemon: &Daemon,
    sent: &Mutex<BTreeMap<u64, Sent>>,
    before_kill: &[Vec<u64>],
) -> usize {
    let sent = sent.lock().expect("sent").clone();
    let recent = sent
        .iter()
        .rev()
        .filter(|(_, r)| r.action.is_some())
        .take(RECENT_RETRIES)
        .map(|(id, _)| *id);
    let ids: BTreeSet<u64> = before_kill
        .iter()
        .flatten()
        .copied()
        .chain(recent)
        .collect();
    let retries = ids.iter().map(|id| {
        let request = &sent[id];
        async move {
            let answer = post(client, &daemon.addr, body(&request.sid, *id, request.size)).await;
            (*id, request, answer)
        }
    });
    let answers: Vec<_> = futures::stream::iter(retries)
        .buffer_unordered(FINAL_CONCURRENCY)
        .collect()
        .await;
    for (id, request, (status, answer, _)) in &answers {
        // Every request was answered 200 by now: by its instance, else on its retry.
        let action = request.action.as_deref().expect("acknowledged");
        assert_eq!(
            (*status, &answer["duplicate"], answer["action"].as_str()),
            (200, &json!(true), Some(action)),
            "final instance: retry of event {id}, first answered {action}: {answer}"
        );
    }
    answers.len()
}

/// Kills a child's whole process group and reaps the child when dropped.
struct GroupGuard(std::process::Child);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Ok(pgid) = i32::try_from(self.0.id()) {
            // SAFETY: kill(2) on the process group this test created with process_group(0).
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
        let _ = self.0.wait();
    }
}

/// Pids a stand-in multiplexer recorded (itself and the sleeper it started).
fn recorded_pids(file: &Path) -> Vec<i32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Kills every recorded pid still alive (only reached when the test already failed).
struct PidsGuard(PathBuf);

impl Drop for PidsGuard {
    fn drop(&mut self) {
        for pid in recorded_pids(&self.0) {
            if process_is_running(pid) {
                // SAFETY: kill(2) on a pid our stand-in script recorded.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

fn write_stand_in(dir: &Path, name: &str, pids: &Path) -> PathBuf {
    let path = dir.join(name);
    let script = format!(
        "#!/bin/sh\n# A multiplexer that hangs: records its pid and its sleeper's, then waits.\n\
         echo $$ >> '{pids}'\nsleep 30 &\necho $! >> '{pids}'\nwait\n",
        pids = pids.display()
    );
    std::fs::write(&path, script).expect("stand-in");
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_multiplexer_answers_within_budget_and_its_children_are_killed() {
    let bin_dir = common::tempdir();
    let pids = bin_dir.path().join("pids");
    let _reap = PidsGuard(pids.clone());
    let tmux = write_stand_in(bin_dir.path(), "tmux", &pids);
    let zellij = write_stand_in(bin_dir.path(), "zellij", &pids);
    let server = TestServer::start(&[
        ("AGENT_EVENT_BUS_BRIDGE_BACKEND", "mux"),
        ("WAKEBRIDGE_MUX__TMUX_BIN", tmux.to_str().expect("utf8")),
        ("WAKEBRIDGE_MUX__ZELLIJ_BIN", zellij.to_str().expect("utf8")),
    ])
    .await;
    std::fs::write(
        server.wake_dir.join("panes.json"),
        json!({
            "hang-tmux": {"mux": "tmux", "pane": "%1"},
            "hang-zellij": {"mux": "zellij", "pane": "0", "session": "z"},
        })
        .to_string(),
    )
    .expect("panes.json");
    let addr = server.addr.to_string();
    // Both sessions at once, then both again: a failed wake rolls its cooldown back, so the
    // second round reaches the hanging multiplexer too.
    for round in 0..2u64 {
        let requests = ["hang-tmux", "hang-zellij"]
            .into_iter()
            .enumerate()
            .map(|(i, sid)| {
                let (client, addr) = (server.client.clone(), addr.clone());
                tokio::spawn(async move {
                    let answer = post(&client, &addr, body(sid, round * 10 + i as u64, 10)).await;
                    (sid, answer)
                })
            })
            .collect::<Vec<_>>();
        for request in requests {
            let (sid, (status, answer, elapsed)) = request.await.expect("request");
            assert_eq!(status, 200, "{sid}: {answer}");
            // The guard call itself hangs and times out: a multiplexer failure, not a stale
            // pane (only a readable "no such pane" answer means stale).
            assert_eq!(
                answer["action"], "spool-mux-failed",
                "{sid} round {round}: {answer}"
            );
            assert!(elapsed < BUS_BUDGET, "{sid} answered after {elapsed:?}");
            assert_eq!(spool_events(&server.wake_dir, sid).len() as u64, round + 1);
        }
    }
    let recorded = recorded_pids(&pids);
    assert!(recorded.len() >= 4, "stand-ins never ran: {recorded:?}");
    // Killing is synchronous with the timeout, but the orphaned sleeper's exit is not: poll.
    // The failed wakes are owed, so the nudger's loop may have just started a `list-panes` of
    // its own on the hanging stand-in: it is killed at its 2 s snapshot budget.
    let deadline = Instant::now() + Duration::from_secs(3);
    while recorded.iter().any(|&p| process_is_running(p)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let alive: Vec<_> = recorded
        .into_iter()
        .filter(|&p| process_is_running(p))
        .collect();
    assert!(
        alive.is_empty(),
        "stand-in processes left running: {alive:?}"
    );
}

/// Processes whose command line mentions `needle` (our tmux clients carry the socket path).
fn processes_mentioning(needle: &str) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
                && process_is_running(pid)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_tmux_server_fails_the_wake_inside_the_budget() {
    if Command::new("tmux").arg("-V").output().is_err() {
        common::skip_or_fail(
            "tmux does not run",
            "`apt-get install tmux` (.ci/run installs it)",
        );
        return;
    }
    let tmux = TmuxServer::start();
    let socket = tmux.socket().to_path_buf();
    let pane = tmux.keeper_pane();
    assert!(pane.starts_with('%'), "pane id {pane:?}");
    let server = TestServer::start(&[
        ("AGENT_EVENT_BUS_BRIDGE_BACKEND", "mux"),
        (
            "WAKEBRIDGE_MUX__TMUX_SOCKET",
            socket.to_str().expect("utf8"),
        ),
        ("WAKEBRIDGE_MUX__SUBMIT_DELAY", "50ms"),
    ])
    .await;
    std::fs::write(
        server.wake_dir.join("panes.json"),
        json!({"live": {"mux": "tmux", "pane": pane}, "frozen": {"mux": "tmux", "pane": pane}})
            .to_string(),
    )
    .expect("panes.json");
    let addr = server.addr.to_string();
    // Baseline: the running server is reachable, so the later failure is the stop's doing.
    let (status, answer, _) = post(&server.client, &addr, body("live", 1, 10)).await;
    assert_eq!(
        (status, answer["action"].clone()),
        (200, json!("tmux")),
        "{answer}"
    );
    tmux.signal(libc::SIGSTOP);
    let (status, answer, elapsed) = post(&server.client, &addr, body("frozen", 2, 10)).await;
    tmux.signal(libc::SIGCONT);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["action"], "spool-mux-failed", "{answer}");
    assert!(elapsed < BUS_BUDGET, "answered after {elapsed:?}");
    assert_eq!(spool_events(&server.wake_dir, "frozen").len(), 1);
    // No client may be left hanging. While the failed wake is owed the nudger's loop runs a
    // short `list-panes` every second, so look once the daemon has stopped (a call it drops
    // takes its process group with it), allowing a moment for the last one to exit.
    server.stop().await;
    let socket_text = socket.display().to_string();
    let clients = || -> Vec<String> {
        processes_mentioning(&socket_text)
            .into_iter()
            .filter(|&p| p != tmux.pid())
            .map(|pid| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                format!(
                    "{pid}: {}",
                    String::from_utf8_lossy(&cmdline).replace('\0', " ")
                )
            })
            .collect()
    };
    let settled = Instant::now();
    while !clients().is_empty() && settled.elapsed() < Duration::from_secs(1) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left = clients();
    assert!(left.is_empty(), "tmux clients left behind: {left:?}");
}

/// A tmpfs mounted for the test; lazily unmounted on drop (or if the test times out).
struct Mount {
    at: PathBuf,
    _unmount: OnTimeout,
}

impl Mount {
    fn tmpfs(at: &Path, options: &str) -> Result<Mount, String> {
        std::fs::create_dir_all(at).map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(at)
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            let at = at.to_path_buf();
            let cleanup = {
                let at = at.clone();
                on_timeout(move || unmount(&at))
            };
            Ok(Mount {
                at,
                _unmount: cleanup,
            })
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        unmount(&self.at);
    }
}

fn unmount(at: &Path) {
    let _ = Command::new("umount").arg("-l").arg(at).status();
}

/// Fills the file system holding `dir` with one file; returns its path.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut file = File::create(&path).expect("filler");
    let chunk = vec![0u8; 1024];
    while file.write_all(&chunk).is_ok() {}
    let _ = file.sync_all();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_file_system_answers_500_tears_nothing_and_recovers() {
    let root = common::tempdir();
    let wake = root.path().join("wake");
    let mount = match Mount::tmpfs(&wake, SMALL_FS) {
        Ok(mount) => mount,
        Err(why) => {
            // A plain skip, in CI too: mounting takes a privilege (CAP_SYS_ADMIN) a container
            // may withhold and no install provides. The RLIMIT_FSIZE test covers the fault.
            eprintln!("skipped: cannot mount a tmpfs ({why})");
            return;
        }
    };
    let client = reqwest::Client::new();
    let daemon = Daemon::spawn(root.path(), &[], None);
    daemon.wait_ready(&client).await;
    let (status, _, _) = post(&client, &daemon.addr, body("full", 1, 10)).await;
    assert_eq!(status, 200);
    let filler = fill(&mount.at);
    for (id, sid) in [(2, "full"), (3, "full-new")] {
        let (status, answer, elapsed) =
            post(&client, &daemon.addr, body(sid, id, BIG_PAYLOAD)).await;
        assert_eq!(status, 500, "{sid} on a full disk: {answer}");
        assert!(elapsed < BUS_BUDGET);
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(error.contains("not spooled"), "{error}");
    }
    let ids: Vec<_> = spool_events(&wake, "full")
        .iter()
        .map(|e| e["event_id"].clone())
        .collect();
    assert_eq!(ids, [json!(1)], "a failed append left something behind");
    assert!(spool_events(&wake, "full-new").is_empty());
    daemon.log_saying(&["spooling failed", "no-space"]).await;
    std::fs::remove_file(filler).expect("free space");
    for (id, sid) in [(2, "full"), (3, "full-new")] {
        let (status, answer, _) = post(&client, &daemon.addr, body(sid, id, BIG_PAYLOAD)).await;
        assert_eq!(status, 200, "{sid} after space returned: {answer}");
    }
    let ids: Vec<_> = spool_events(&wake, "full")
        .iter()
        .map(|e| e["event_id"].clone())
        .collect();
    assert_eq!(ids, [json!(1), json!(2)]);
    assert_eq!(spool_events(&wake, "full-new").len(), 1);
    drop(daemon);
}

/// In the daemon child before exec: cap every file it writes at `FSIZE_LIMIT` and turn the
/// SIGXFSZ that would kill it into a plain EFBIG error.
fn limit_file_size() -> i32 {
    let limit = libc::rlimit {
        rlim_cur: FSIZE_LIMIT,
        rlim_max: FSIZE_LIMIT,
    };
    // SAFETY: setrlimit and signal are async-signal-safe; both get valid arguments.
    unsafe {
        if libc::signal(libc::SIGXFSZ, libc::SIG_IGN) == libc::SIG_ERR {
            return -1;
        }
        libc::setrlimit(libc::RLIMIT_FSIZE, &limit)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_size_limit_answers_500_tears_nothing_and_recovers_after_a_drain() {
    let root = common::tempdir();
    let wake = root.path().join("wake");
    let client = reqwest::Client::new();
    let daemon = Daemon::spawn(root.path(), &[], Some(limit_file_size));
    daemon.wait_ready(&client).await;
    let mut accepted = Vec::new();
    let mut refused = None;
    for id in 1..=(FSIZE_LIMIT / BIG_PAYLOAD as u64 + 2) {
        let (status, answer, elapsed) =
            post(&client, &daemon.addr, body("capped", id, BIG_PAYLOAD)).await;
        assert!(elapsed < BUS_BUDGET);
        match status {
            200 => accepted.push(json!(id)),
            500 => {
                refused = Some(id);
                break;
            }
            other => panic!("unexpected {other}: {answer}"),
        }
    }
    let refused = refused.expect("the size limit was never reached");
    let ids: Vec<_> = spool_events(&wake, "capped")
        .iter()
        .map(|e| e["event_id"].clone())
        .collect();
    assert_eq!(
        ids, accepted,
        "the refused append left part of itself behind"
    );
    let size = std::fs::metadata(wake.join("capped.jsonl"))
        .expect("spool")
        .len();
    assert!(size < FSIZE_LIMIT, "spool is {size} bytes");
    // Another session's spool has its own room.
    let (status, _, _) = post(&client, &daemon.addr, body("other", 99, 10)).await;
    assert_eq!(status, 200);
    daemon.log_saying(&["spooling failed"]).await;
    // A drainer empties the spool under its lock; service resumes.
    {
        let lock = File::create(wake.join("capped.lock")).expect("lock");
        lock.lock().expect("flock");
        OpenOptions::new()
            .write(true)
            .open(wake.join("capped.jsonl"))
            .and_then(|f| f.set_len(0))
            .expect("drain");
        lock.unlock().expect("unlock");
    }
    let (status, answer, _) =
        post(&client, &daemon.addr, body("capped", refused, BIG_PAYLOAD)).await;
    assert_eq!(status, 200, "after the drain: {answer}");
    assert_eq!(spool_events(&wake, "capped").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stuck_drainer_fails_only_its_session_after_the_lock_budget() {
    let server = TestServer::start(&[]).await;
    let lock_path = server.wake_dir.join("stuck.lock");
    // Its own process group: the lock fd is inherited by `sleep`, so the whole group must die
    // to release it (and to leave nothing behind).
    let drainer = Command::new("flock")
        .arg(&lock_path)
        .args(["sleep", "30"])
        .process_group(0)
        .spawn()
        .expect("util-linux flock");
    let drainer = GroupGuard(drainer);
    // Wait until the drainer really holds the lock.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let probe = File::open(&lock_path).ok();
        if probe
            .as_ref()
            .is_some_and(|f| matches!(f.try_lock(), Err(TryLockError::WouldBlock)))
        {
            break;
        }
        assert!(Instant::now() < deadline, "flock never took the lock");
        std::thread::sleep(Duration::from_millis(20));
    }
    let addr = server.addr.to_string();
    let (stuck, free) = tokio::join!(
        post(&server.client, &addr, body("stuck", 1, 10)),
        post(&server.client, &addr, body("free", 2, 10)),
    );
    let (status, answer, elapsed) = stuck;
    assert_eq!(status, 500, "{answer}");
    assert!(
        elapsed >= LOCK_BUDGET - Duration::from_millis(100)
            && elapsed < LOCK_BUDGET + Duration::from_millis(1500),
        "stuck session answered after {elapsed:?}"
    );
    let (status, answer, elapsed) = free;
    assert_eq!(status, 200, "{answer}");
    assert!(
        elapsed < Duration::from_secs(1),
        "free session waited {elapsed:?}"
    );
    assert!(spool_events(&server.wake_dir, "stuck").is_empty());
    drop(drainer);
    let (status, answer, _) = post(&server.client, &addr, body("stuck", 1, 10)).await;
    assert_eq!(status, 200, "after the drainer died: {answer}");
    assert_eq!(spool_events(&server.wake_dir, "stuck").len(), 1);
}
