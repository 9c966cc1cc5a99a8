//! The daemon at rest with a fleet (prints figures; not a timed test): the real release binary
//! `serve`s with its shipped defaults while 1,000 idle sessions are known to it, the way users'
//! hooks make them known, and is measured from outside: its CPU (utime + stime from
//! `/proc/<pid>/stat`, as a share of one core), its RSS (`VmRSS`, sampled every second: the
//! largest sample, the first, the last and one every 10 s), its threads, then the latency of
//! `GET /sessions` and of `GET /metrics`.
//!
//!     cargo bench --bench fleet_at_rest                          # 1000 sessions, 60 s
//!     WB_BENCH_SESSIONS=300 cargo bench --bench fleet_at_rest
//!     WB_BENCH_BIN=/tmp/before/wakebridge cargo bench --bench fleet_at_rest   # another build
//!
//! Knobs (environment): WB_BENCH_SESSIONS (default 1000), WB_BENCH_SECONDS (the window measured
//! at rest, default 60; past ~270 the nudger's `idle_after`, 5 min since the hooks ran, starts
//! typing nudges into the panes, and the fleet is no longer at rest), WB_BENCH_REQUESTS
//! (`/sessions` requests, default 200), WB_BENCH_SETTLE (seconds left to settle once `/sessions`
//! lists every session, default 15), WB_BENCH_DAEMON_ENV (`K=V,K=V` added to the daemon's
//! environment, e.g. `MALLOC_ARENA_MAX=1`), WB_BENCH_BIN (the binary; default
//! `target/release/wakebridge`, which `cargo build --release --bin wakebridge` builds first when
//! it is missing or stale).
//!
//! Everything lives in a fresh temp dir: a private HOME, XDG dirs, wake dir and
//! `CLAUDE_CONFIG_DIR`, and a private tmux server (`tmux -S <temp dir>/tmux.sock -f /dev/null`,
//! never the user's), handed to the daemon as `WAKEBRIDGE_MUX__TMUX_SOCKET`. About 90 % of the
//! sessions sit in panes of that server (two panes a window, each running a long `sleep`); the
//! rest are reached only through a stand-in inbox: a Unix socket the bench listens on in a
//! private (0700) dir, each connection read and dropped. Each session has a transcript with a
//! prompt, a tool call, its result and an answer, and its ledger rows come from the real
//! `wakebridge hook`, run once with a SessionStart payload and once with a Stop, with the
//! environment Claude Code gives its hooks (`TMUX`/`TMUX_PANE` in a pane; the messaging socket,
//! token and `CLAUDE_PID` for an inbox). The daemon then starts with its defaults but for a
//! free port, the registration off and the private dirs above; the window starts once
//! `/sessions` lists every session and the settle time has passed. `/sessions` is then read
//! `WB_BENCH_REQUESTS` times in a row over one keep-alive connection, and `/metrics` 10 times.
//! Whatever happens, the daemon and the tmux server are killed and the temp dir removed.

// A benchmark stops on the first failure: unwrapping is how it says so.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// `wakebridge hook` processes run at once while the ledger is filled.
const HOOK_WORKERS: usize = 4;
/// Panes per tmux window, and windows per tmux session.
const PANES_PER_WINDOW: usize = 2;
const WINDOWS_PER_SESSION: usize = 50;
/// Sessions per project directory (Claude Code keeps one transcript dir per working dir).
const SESSIONS_PER_PROJECT: usize = 25;
/// `GET /metrics` requests timed after `/sessions`.
const METRICS_REQUESTS: usize = 10;

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// splitmix64: ids, token counts and uuids that look like real ones, the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn uuid(&mut self) -> String {
        let (a, b) = (self.next(), self.next());
        format!(
            "{:08x}-{:04x}-4{:03x}-{:x}{:03x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            8 + (b >> 62),
            (b >> 48) & 0xfff,
            b & 0xffff_ffff_ffff
        )
    }

    fn hex(&mut self, digits: usize) -> String {
        (0..digits)
            .map(|_| char::from_digit(self.below(16) as u32, 16).unwrap())
            .collect()
    }
}

/// How a session is reached: a pane of the private tmux server, or only its inbox.
enum Reach {
    Pane(String),
    Inbox { socket: PathBuf, token: String },
}

struct Session {
    id: String,
    cwd: PathBuf,
    transcript: PathBuf,
    reach: Reach,
}

/// The daemon, the tmux server and the temp dir: torn down in this order whatever happens (a
/// panic included, which also shows the end of the daemon's log).
struct Fleet {
    daemon: Option<Child>,
    tmux: PathBuf,
    log: PathBuf,
    root: tempfile::TempDir,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        if let Some(mut daemon) = self.daemon.take() {
            let _ = daemon.kill();
            let _ = daemon.wait();
        }
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.tmux)
            .arg("kill-server")
            .stderr(Stdio::null())
            .status();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            eprintln!("--- the daemon's log, last lines ---");
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
        // `root` goes after this: the temp dir with everything in it.
    }
}

impl Fleet {
    fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    /// The environment every process of the fleet gets (and nothing of the caller's but PATH).
    fn private_env(&self, command: &mut Command) {
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.path("home"))
            .env("XDG_RUNTIME_DIR", self.path("run"))
            .env("XDG_STATE_HOME", self.path("state"))
            .env("XDG_CONFIG_HOME", self.path("config"))
            .env("AGENT_EVENT_BUS_WAKE_DIR", self.path("wake"))
            .env("CLAUDE_CONFIG_DIR", self.path("claude"))
            .env("WAKEBRIDGE_MUX__TMUX_SOCKET", &self.tmux)
            .env("WAKEBRIDGE_REGISTRATION__ENABLED", "false");
    }

    fn tmux(&self, args: &[&str]) -> String {
        let mut command = Command::new("tmux");
        self.private_env(&mut command);
        let out = command
            .env("SHELL", "/bin/sh")
            .arg("-S")
            .arg(&self.tmux)
            .args(["-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux");
        assert!(
            out.status.success(),
            "tmux {:?}: {}",
            &args[..args.len().min(8)],
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

/// `count` panes running a long `sleep`, two a window, fifty windows a tmux session, made in
/// batches of commands per tmux call; their ids in order.
fn make_panes(fleet: &Fleet, count: usize) -> Vec<String> {
    const PANE: &str = "exec sleep 1000000";
    let per_session = PANES_PER_WINDOW * WINDOWS_PER_SESSION;
    for s in 0..count.div_ceil(per_session) {
        let name = format!("fleet-{s}");
        let here = (count - s * per_session).min(per_session);
        let mut args: Vec<String> = Vec::new();
        let mut add = |command: &[&str]| {
            if !args.is_empty() {
                args.push(";".into());
            }
            args.extend(command.iter().map(|&a| a.to_owned()));
        };
        add(&[
            "new-session",
            "-d",
            "-s",
            &name,
            "-x",
            "200",
            "-y",
            "50",
            PANE,
        ]);
        for p in 1..here {
            let window = format!("{name}:{}", p / PANES_PER_WINDOW);
            if p % PANES_PER_WINDOW == 0 {
                add(&["new-window", "-d", "-t", &window, PANE]);
            } else {
                add(&["split-window", "-d", "-h", "-t", &window, PANE]);
            }
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        fleet.tmux(&args);
    }
    let panes: Vec<String> = fleet
        .tmux(&["list-panes", "-a", "-F", "#{pane_id}"])
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(panes.len(), count, "panes made");
    panes
}

/// Listens on `socket` as a session's inbox would: each connection read to its end and dropped.
fn stand_in_inbox(socket: &Path, accepted: Arc<AtomicUsize>) {
    let listener = UnixListener::bind(socket).expect("bind a stand-in inbox");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            accepted.fetch_add(1, Ordering::Relaxed);
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let _ = std::io::copy(&mut stream, &mut std::io::sink());
        }
    });
}

/// A transcript as Claude Code writes one: a prompt, a tool call, its result, the answer; both
/// assistant records carry the model and the usage the context monitor reads.
fn transcript_text(rng: &mut Rng, session: &Session, model: &str) -> String {
    let now = jiff::Timestamp::now();
    let at = |ago_s: i64| format!("{:.3}", now - jiff::SignedDuration::from_secs(ago_s));
    let cwd = session.cwd.display().to_string();
    let ago = 120 + rng.below(1800) as i64;
    let cache_read = 20_000 + rng.below(100_000);
    let (created, output) = (rng.below(4_000), 50 + rng.below(900));
    let input = 4 + rng.below(8);
    let usage = |read: u64, created: u64, output: u64| {
        json!({"input_tokens": input, "cache_creation_input_tokens": created,
               "cache_read_input_tokens": read, "output_tokens": output,
               "service_tier": "standard"})
    };
    let (u1, u2, u3, u4) = (rng.uuid(), rng.uuid(), rng.uuid(), rng.uuid());
    let tool = format!("toolu_01{}", rng.hex(22));
    let envelope = |kind: &str, parent: Option<&str>, uuid: &str, ago_s: i64| {
        json!({"parentUuid": parent, "isSidechain": false, "userType": "external", "cwd": cwd,
               "sessionId": session.id, "version": "2.1.240", "gitBranch": "main",
               "type": kind, "uuid": uuid, "timestamp": at(ago_s)})
    };
    let with = |mut record: Value, key: &str, value: Value| {
        record[key] = value;
        record
    };
    let prompt = with(
        envelope("user", None, &u1, ago + 60),
        "message",
        json!({"role": "user", "content": "Run the test suite and fix whatever fails in the \
               parser; keep the public API as it is and explain each change briefly."}),
    );
    let call = with(
        envelope("assistant", Some(&u1), &u2, ago + 50),
        "message",
        json!({"id": format!("msg_01{}", rng.hex(22)), "type": "message", "role": "assistant",
               "model": model, "content": [
                   {"type": "text", "text": "I'll run the tests first to see what fails."},
                   {"type": "tool_use", "id": tool, "name": "Bash",
                    "input": {"command": "cargo test 2>&1 | tail -40",
                              "description": "Run the test suite"}}],
               "stop_reason": "tool_use", "stop_sequence": null,
               "usage": usage(cache_read - 3_000, 3_000, 120)}),
    );
    let result = with(
        envelope("user", Some(&u2), &u3, ago + 20),
        "message",
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool,
               "content": "test result: ok. 214 passed; 0 failed; 3 ignored; 0 measured; \
                           0 filtered out; finished in 4.21s", "is_error": false}]}),
    );
    let answer = with(
        envelope("assistant", Some(&u3), &u4, ago),
        "message",
        json!({"id": format!("msg_01{}", rng.hex(22)), "type": "message", "role": "assistant",
               "model": model, "content": [{"type": "text", "text": "All 214 tests pass; \
               nothing in the parser needed fixing. The three ignored tests need network."}],
               "stop_reason": "end_turn", "stop_sequence": null,
               "usage": usage(cache_read, created, output)}),
    );
    [prompt, call, result, answer]
        .iter()
        .map(|r| format!("{r}\n"))
        .collect()
}

/// `wakebridge hook` once with `payload` on stdin, as Claude Code runs it for `session`.
fn hook(fleet: &Fleet, bin: &Path, session: &Session, payload: &Value, tmux_server: &str) {
    let mut command = Command::new(bin);
    fleet.private_env(&mut command);
    match &session.reach {
        Reach::Pane(pane) => {
            let tmux = format!("{},{tmux_server},0", fleet.tmux.display());
            command.env("TMUX", tmux).env("TMUX_PANE", pane)
        }
        Reach::Inbox { socket, token } => command
            .env("CLAUDE_CODE_MESSAGING_SOCKET", socket)
            .env("CLAUDE_CODE_MESSAGING_TOKEN", token)
            .env("CLAUDE_PID", std::process::id().to_string()),
    };
    let mut child = command
        .arg("hook")
        .current_dir(&session.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run wakebridge hook");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(payload.to_string().as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().expect("wakebridge hook");
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "wakebridge hook {}: {}",
        payload["hook_event_name"],
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One HTTP/1.1 GET on a keep-alive connection: the status and the body.
fn get(stream: &mut BufReader<TcpStream>, port: u16, path: &str) -> (u16, Vec<u8>) {
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    stream.get_mut().write_all(request.as_bytes()).unwrap();
    let mut line = String::new();
    stream.read_line(&mut line).unwrap();
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut length = None;
    loop {
        line.clear();
        stream.read_line(&mut line).unwrap();
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok();
        }
    }
    let mut body = vec![0; length.expect("a Content-Length")];
    stream.read_exact(&mut body).unwrap();
    (status, body)
}

fn connect(port: u16) -> BufReader<TcpStream> {
    let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream.set_nodelay(true).unwrap();
    BufReader::with_capacity(256 * 1024, stream)
}

/// utime + stime, cutime + cstime (children reaped) and threads from `/proc/<pid>/stat`.
fn cpu_ticks(pid: u32) -> (u64, u64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the daemon runs");
    // The fields after the command name in parentheses, from field 3 (state) on.
    let fields: Vec<u64> = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    (fields[11] + fields[12], fields[13] + fields[14], fields[17])
}

/// A `/proc/<pid>/status` field in kB (or a count).
fn status_field(pid: u32, name: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(name) && l[name.len()..].starts_with(':'))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions; it reads a constant of the system.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

fn percentile(sorted: &[Duration], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize].as_secs_f64() * 1000.0
}

fn load_average() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    load.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// `target/release/wakebridge` as `cargo build --release --bin wakebridge` makes it (a no-op
/// when it is fresh). Not `CARGO_BIN_EXE_wakebridge`: `cargo bench` builds that one with the
/// dev-dependencies' features as well (reqwest's `rustls` with aws-lc, tokio's `test-util`),
/// a larger image (10.1 MB against 8.6) than users run, and its memory is not theirs.
fn release_build() -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    // The variables `cargo bench` sets for this process: build scripts read some of them
    // (ring's `CARGO_MANIFEST_DIR`), and a build that saw them is stale to the next plain one.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let set_for_us = name.starts_with("CARGO_PKG_")
            || [
                "CARGO_MANIFEST_DIR",
                "CARGO_MANIFEST_PATH",
                "CARGO_CRATE_NAME",
                "CARGO_BIN_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
                "OUT_DIR",
            ]
            .contains(&&*name);
        if set_for_us {
            command.env_remove(&*name);
        }
    }
    let out = command
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["build", "--release", "--bin", "wakebridge"])
        .arg("--message-format=json-render-diagnostics")
        .stderr(Stdio::inherit())
        .output()
        .expect("run cargo build");
    assert!(out.status.success(), "cargo build --release failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "wakebridge")
        .find_map(|m| Some(PathBuf::from(m["executable"].as_str()?)))
        .expect("cargo named the wakebridge executable")
}

fn main() {
    let count = knob("WB_BENCH_SESSIONS", 1000) as usize;
    let seconds = knob("WB_BENCH_SECONDS", 60);
    let requests = knob("WB_BENCH_REQUESTS", 200).max(1) as usize;
    let settle = knob("WB_BENCH_SETTLE", 15);
    let bin = std::env::var_os("WB_BENCH_BIN").map_or_else(release_build, PathBuf::from);
    assert!(bin.is_file(), "no binary at {}", bin.display());
    let load_before = load_average();
    let root = tempfile::tempdir().expect("tempdir");
    let mut fleet = Fleet {
        daemon: None,
        tmux: root.path().join("tmux.sock"),
        log: root.path().join("daemon.log"),
        root,
    };
    for dir in [
        "home",
        "run",
        "state",
        "config",
        "wake",
        "claude/projects",
        "inbox",
    ] {
        std::fs::create_dir_all(fleet.path(dir)).unwrap();
    }
    for private in ["run", "inbox"] {
        std::fs::set_permissions(fleet.path(private), std::fs::Permissions::from_mode(0o700))
            .unwrap();
    }

    // Every tenth session is reached only by its inbox; the others sit in panes.
    let inbox_only = |i: usize| i % 10 == 9;
    let pane_count = (0..count).filter(|&i| !inbox_only(i)).count();
    let started = Instant::now();
    let mut panes = make_panes(&fleet, pane_count).into_iter();
    let tmux_server = fleet.tmux(&["display-message", "-p", "#{pid}"]);
    let panes_took = started.elapsed();

    let accepted = Arc::new(AtomicUsize::new(0));
    let mut rng = Rng(0x5eed_f1ee);
    let models = [
        "claude-opus-4-5-20251101",
        "claude-sonnet-4-5-20250929",
        "claude-opus-4-6",
    ];
    let sessions: Vec<Session> = (0..count)
        .map(|i| {
            let cwd = fleet.path(&format!("work/project-{}", i / SESSIONS_PER_PROJECT));
            let id = rng.uuid();
            let project: String = (cwd.display().to_string().chars())
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                .collect();
            let transcript = fleet
                .path("claude/projects")
                .join(project)
                .join(format!("{id}.jsonl"));
            let reach = if inbox_only(i) {
                let socket = fleet.path(&format!("inbox/{i}.sock"));
                stand_in_inbox(&socket, accepted.clone());
                Reach::Inbox {
                    socket,
                    token: rng.hex(32),
                }
            } else {
                Reach::Pane(panes.next().unwrap())
            };
            let session = Session {
                id,
                cwd,
                transcript,
                reach,
            };
            std::fs::create_dir_all(&session.cwd).unwrap();
            std::fs::create_dir_all(session.transcript.parent().unwrap()).unwrap();
            let model = models[rng.below(models.len() as u64) as usize];
            std::fs::write(
                &session.transcript,
                transcript_text(&mut rng, &session, model),
            )
            .unwrap();
            session
        })
        .collect();

    // The ledger as users fill it: SessionStart, then the turn's Stop, per session.
    let hooks_started = Instant::now();
    std::thread::scope(|scope| {
        for worker in 0..HOOK_WORKERS {
            let (fleet, bin, sessions, server) = (&fleet, &bin, &sessions, &tmux_server);
            scope.spawn(move || {
                for session in sessions.iter().skip(worker).step_by(HOOK_WORKERS) {
                    let base = json!({"session_id": session.id,
                                      "transcript_path": session.transcript,
                                      "cwd": session.cwd});
                    let mut start = base.clone();
                    start["hook_event_name"] = "SessionStart".into();
                    start["source"] = "startup".into();
                    hook(fleet, bin, session, &start, server);
                    let mut stop = base;
                    stop["hook_event_name"] = "Stop".into();
                    stop["permission_mode"] = "default".into();
                    stop["stop_hook_active"] = false.into();
                    hook(fleet, bin, session, &stop, server);
                }
            });
        }
    });
    let hooks_took = hooks_started.elapsed();

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let mut command = Command::new(&bin);
    fleet.private_env(&mut command);
    // WB_BENCH_DAEMON_ENV="K=V,K=V": more of the daemon's environment, for experiments.
    let extra = std::env::var("WB_BENCH_DAEMON_ENV").unwrap_or_default();
    for (key, value) in extra.split(',').filter_map(|kv| kv.split_once('=')) {
        command.env(key, value);
    }
    let log = std::fs::File::create(&fleet.log).unwrap();
    fleet.daemon = Some(
        command
            .args(["serve", "--port", &port.to_string()])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start the daemon"),
    );
    let pid = fleet.daemon.as_ref().unwrap().id();
    let up = Instant::now();
    let listed = |body: &[u8]| {
        let sessions: Value = serde_json::from_slice(body).expect("/sessions is JSON");
        sessions["sessions"].as_array().map_or(0, Vec::len)
    };
    loop {
        assert!(
            up.elapsed() < Duration::from_secs(120),
            "/sessions did not list all {count} sessions within 120 s"
        );
        if let Some(exit) = fleet.daemon.as_mut().unwrap().try_wait().unwrap() {
            panic!("the daemon exited: {exit}");
        }
        let known = TcpStream::connect(("127.0.0.1", port))
            .ok()
            .map(|stream| get(&mut BufReader::new(stream), port, "/sessions"))
            .filter(|(status, _)| *status == 200)
            .map_or(0, |(_, body)| listed(&body));
        if known >= count {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let listed_after = up.elapsed();
    std::thread::sleep(Duration::from_secs(settle));

    // At rest.
    let tick = clock_ticks_per_second();
    let tmux_pid: u32 = tmux_server.parse().expect("the tmux server's pid");
    let log_before = std::fs::metadata(&fleet.log).map_or(0, |m| m.len());
    let (cpu0, children0, _) = cpu_ticks(pid);
    let (tmux0, _, _) = cpu_ticks(tmux_pid);
    let window = Instant::now();
    let (mut rss_max, mut threads_max) = (0, 0);
    let (mut rss_first, mut rss_last) = (0, 0);
    let mut rss_every_10s = Vec::new();
    let mut threads_last = 0;
    for second in 1..=seconds {
        let next = window + Duration::from_secs(second);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        if let Some(exit) = fleet.daemon.as_mut().unwrap().try_wait().unwrap() {
            panic!("the daemon exited: {exit}");
        }
        rss_last = status_field(pid, "VmRSS");
        if second == 1 {
            rss_first = rss_last;
        }
        if second % 10 == 0 {
            rss_every_10s.push(format!("{:.1}", rss_last as f64 / 1024.0));
        }
        threads_last = status_field(pid, "Threads");
        rss_max = rss_max.max(rss_last);
        threads_max = threads_max.max(threads_last);
    }
    let wall = window.elapsed().as_secs_f64();
    let (cpu1, children1, _) = cpu_ticks(pid);
    let (tmux1, _, _) = cpu_ticks(tmux_pid);
    let (rss_anon, rss_file) = (status_field(pid, "RssAnon"), status_field(pid, "RssFile"));
    let share = |ticks: u64| ticks as f64 / tick / wall * 100.0;
    let log_grew = std::fs::metadata(&fleet.log).map_or(0, |m| m.len()) - log_before;

    // `/sessions` and `/metrics`, one after another on one keep-alive connection.
    let mut stream = connect(port);
    let mut took = Vec::with_capacity(requests);
    let mut body = Vec::new();
    let (cpu_reads0, _, _) = cpu_ticks(pid);
    for _ in 0..requests {
        let at = Instant::now();
        let (status, answer) = get(&mut stream, port, "/sessions");
        took.push(at.elapsed());
        assert_eq!(status, 200, "/sessions");
        body = answer;
    }
    let (cpu_reads1, _, _) = cpu_ticks(pid);
    let rss_after_reads = status_field(pid, "VmRSS");
    let mut metrics_took = Vec::with_capacity(METRICS_REQUESTS);
    let mut metrics_bytes = 0;
    for _ in 0..METRICS_REQUESTS {
        let at = Instant::now();
        let (status, answer) = get(&mut stream, port, "/metrics");
        metrics_took.push(at.elapsed());
        assert_eq!(status, 200, "/metrics");
        metrics_bytes = answer.len();
    }
    took.sort();
    metrics_took.sort();
    let answer: Value = serde_json::from_slice(&body).expect("/sessions is JSON");
    let listed_sessions = answer["sessions"].as_array().cloned().unwrap_or_default();
    let mut states = std::collections::BTreeMap::<String, usize>::new();
    for session in &listed_sessions {
        let state = session["state"].as_str().unwrap_or("?").to_owned();
        *states.entry(state).or_default() += 1;
    }
    let with_context = (listed_sessions.iter())
        .filter(|s| s["context"]["percent"].is_number())
        .count();
    let live_inboxes = (listed_sessions.iter())
        .filter(|s| s["inbox"]["live"] == true)
        .count();
    let states: Vec<String> = states.iter().map(|(s, n)| format!("{s} {n}")).collect();

    println!(
        "fleet_at_rest sessions={count} ({pane_count} in tmux panes, {} inbox only), binary {}",
        count - pane_count,
        bin.display()
    );
    println!(
        "  setup: panes {:.1} s; {} hooks {:.1} s ({HOOK_WORKERS} at a time); /sessions listed \
         all {:.1} s after the start; settled {settle} s",
        panes_took.as_secs_f64(),
        2 * count,
        hooks_took.as_secs_f64(),
        listed_after.as_secs_f64()
    );
    println!(
        "  at rest over {wall:.1} s: CPU {:.2} % of a core (children reaped {:.2} %, tmux server \
         {:.2} %)",
        share(cpu1 - cpu0),
        share(children1 - children0),
        share(tmux1 - tmux0)
    );
    println!(
        "  RSS max {} ({} kB), first {}, last {} (anon {}, file {}); threads max \
         {threads_max}, last {threads_last}; log +{log_grew} bytes",
        mib(rss_max),
        rss_max,
        mib(rss_first),
        mib(rss_last),
        mib(rss_anon),
        mib(rss_file)
    );
    println!("  RSS every 10 s (MiB): {}", rss_every_10s.join(" "));
    println!(
        "  GET /sessions x{requests}, one keep-alive connection, in a row: p50 {:.1} ms, p90 \
         {:.1} ms, p99 {:.1} ms, max {:.1} ms; body {} bytes; daemon CPU {:.1} ms a request; \
         RSS after {}",
        percentile(&took, 0.5),
        percentile(&took, 0.9),
        percentile(&took, 0.99),
        percentile(&took, 1.0),
        body.len(),
        (cpu_reads1 - cpu_reads0) as f64 / tick * 1000.0 / requests as f64,
        mib(rss_after_reads)
    );
    println!(
        "  GET /metrics x{METRICS_REQUESTS}: p50 {:.1} ms, max {:.1} ms; body {metrics_bytes} \
         bytes",
        percentile(&metrics_took, 0.5),
        percentile(&metrics_took, 1.0)
    );
    println!(
        "  sessions listed {}: {}; with context figures {with_context}; live inboxes \
         {live_inboxes}; inbox connections {}",
        listed_sessions.len(),
        states.join(", "),
        accepted.load(Ordering::Relaxed)
    );
    println!(
        "  load average before {load_before}, after {}",
        load_average()
    );
}
