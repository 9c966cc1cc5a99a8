//! The zellij backend against a REAL zellij (0.44 or later: `list-panes` and `--pane-id`): a
//! detached session per test on a private socket dir with a private HOME, XDG dirs and config
//! (no startup tips, no release notes, `/bin/sh` panes), a pane running a raw-mode recorder,
//! and the real [`Injector`] (and, once, the real daemon over HTTP) typing into it. The stand-in
//! tests in tests/it/mux.rs pin the argv; these prove that the real zellij agrees with it. Every
//! test skips with a note when no zellij 0.44+ binary is found ($WB_TEST_ZELLIJ, then PATH,
//! then /opt/zellij/bin/zellij), and fails instead in CI, where `.ci/run` installs one.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::json;
use wakebridge::deadline::Deadline;
use wakebridge::mux::{
    INJECT_BUDGET, InjectError, Injector, KeystrokeText, MuxConfig, StaleReason, WAKE_PROMPT,
};
use wakebridge::wakedir::target::PaneTarget;

use crate::common;
use crate::common::CLAUDE;
use crate::common::harness::{DEFAULT_EVENT, TestServer};
use crate::common::timeout::{OnTimeout, on_timeout};
use crate::common::tmux::read_when_settled;
use crate::common::zellij_target;

/// Where `cargo install --locked zellij --root /opt/zellij` puts the binary on dev machines.
const OPT_ZELLIJ: &str = "/opt/zellij/bin/zellij";

/// The environment variable that names a zellij binary explicitly (takes precedence).
const ZELLIJ_ENV: &str = "WB_TEST_ZELLIJ";

/// The first zellij with `action list-panes` and `--pane-id` on every action (0.44.0).
const MIN_VERSION: (u64, u64) = (0, 44);

/// How long a session may take to come up (the first start compiles zellij's built-in wasm
/// plugins into the private cache) or a pane to start its program, on 2 shared cores.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Longest one zellij call of the tests may take (see `ZellijWorld::run`); a session's start
/// answers within seconds even while its plugins compile.
const CALL_TIMEOUT: Duration = Duration::from_secs(20);

/// How long a cleanup waits for killed zellij processes to disappear.
const KILL_TIMEOUT: Duration = Duration::from_secs(5);

const POLL_EVERY: Duration = Duration::from_millis(50);

/// Pause between text and Enter: short, the recorder is no TUI.
const SUBMIT_DELAY: Duration = Duration::from_millis(100);

/// Marks every process started for one test (wrapper env, inherited by the zellij server and
/// its panes), so cleanup kills exactly those and nothing else.
const MARKER_VAR: &str = "WB_ZELLIJ_TEST";

/// The configuration every test session gets: nothing may pop up over the panes, and panes run
/// a plain shell whatever the user's SHELL is.
const CONFIG_KDL: &str = "show_startup_tips false\nshow_release_notes false\n\
                          default_shell \"/bin/sh\"\npane_frames false\n";

/// The zellij binary to test against, or `None` (with a note on stderr) to skip; in CI, no
/// usable zellij fails the test ([`common::skip_or_fail`]).
fn zellij_or_skip(test: &str) -> Option<PathBuf> {
    let explicit = std::env::var_os(ZELLIJ_ENV).map(PathBuf::from);
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("zellij"))
            .find(|p| is_executable(p))
    });
    let found = explicit
        .into_iter()
        .chain(on_path)
        .chain(Some(PathBuf::from(OPT_ZELLIJ)))
        .find(|p| is_executable(p));
    let how = format!(
        "set {ZELLIJ_ENV}, put zellij 0.44+ on PATH, or `cargo install --locked zellij --root \
         /opt/zellij` (.ci/run installs it)"
    );
    let Some(bin) = found else {
        common::skip_or_fail(&format!("{test}: no zellij binary"), &how);
        return None;
    };
    match version_of(&bin) {
        Some(v) if v >= MIN_VERSION => Some(bin),
        other => {
            common::skip_or_fail(
                &format!(
                    "{test}: {} is version {other:?}, these tests need 0.44+",
                    bin.display()
                ),
                &how,
            );
            None
        }
    }
}

fn is_executable(path: &Path) -> bool {
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// `(major, minor)` from `zellij --version` (`zellij 0.45.1`).
fn version_of(bin: &Path) -> Option<(u64, u64)> {
    let out = Command::new(bin).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text.split_whitespace().nth(1)?.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// A private zellij world for one test: a temp dir holding the socket dir, HOME, XDG dirs and
/// config, and a wrapper script that runs the real binary inside it. The wrapper is what the
/// code under test gets as `zellij_bin`, so the daemon's calls reach this world and no other.
/// Dropping it kills every session and every process started through the wrapper.
struct ZellijWorld {
    dir: tempfile::TempDir,
    wrapper: PathBuf,
    /// Held for the world's life: see [`ONE_WORLD_AT_A_TIME`].
    _turn: MutexGuard<'static, ()>,
    /// Kills the world's sessions and processes if the test times out (no drop then).
    _on_timeout: OnTimeout,
}

/// One zellij world at a time in this binary. Eight servers starting at once (each compiling
/// its wasm plugins) on 2 cores make zellij 0.45.1 lose IPC replies (a `run` that prints no
/// id, an action that finds "no active session"), which tests the machine, not wakebridge.
static ONE_WORLD_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Sessions started in this test binary, for unique names.
static SESSIONS: AtomicUsize = AtomicUsize::new(0);

impl ZellijWorld {
    fn new(real: &Path) -> Self {
        let turn = ONE_WORLD_AT_A_TIME
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Short: zellij's socket path (dir + version + session name) must fit sun_path.
        let dir = tempfile::Builder::new()
            .prefix("wbzj")
            .tempdir_in("/tmp")
            .expect("temp dir");
        let root = dir.path();
        for sub in ["home", "config", "cache", "data", "run", "sock"] {
            std::fs::create_dir_all(root.join(sub)).expect("private dir");
        }
        let config = root.join("config.kdl");
        std::fs::write(&config, CONFIG_KDL).expect("config");
        let quoted = |p: &Path| {
            let s = p.display().to_string();
            assert!(!s.contains('\''), "unquotable path {s}");
            format!("'{s}'")
        };
        let script = format!(
            "#!/bin/sh\n\
             unset ZELLIJ ZELLIJ_SESSION_NAME ZELLIJ_PANE_ID\n\
             export {MARKER_VAR}={root}\n\
             export HOME={home} XDG_CONFIG_HOME={cfg} XDG_CACHE_HOME={cache} \
             XDG_DATA_HOME={data} XDG_RUNTIME_DIR={run} ZELLIJ_SOCKET_DIR={sock} \
             ZELLIJ_CONFIG_FILE={config} SHELL=/bin/sh\n\
             exec {real} \"$@\"\n",
            root = quoted(root),
            home = quoted(&root.join("home")),
            cfg = quoted(&root.join("config")),
            cache = quoted(&root.join("cache")),
            data = quoted(&root.join("data")),
            run = quoted(&root.join("run")),
            sock = quoted(&root.join("sock")),
            config = quoted(&config),
            real = quoted(real),
        );
        let wrapper = root.join("zellij");
        std::fs::write(&wrapper, script).expect("wrapper");
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))
            .expect("chmod wrapper");
        let on_timeout = {
            let (wrapper, root) = (wrapper.clone(), root.to_path_buf());
            on_timeout(move || {
                let _ = Command::new(&wrapper)
                    .args(["kill-all-sessions", "--yes"])
                    .stdin(std::process::Stdio::null())
                    .output();
                for pid in processes_marked_with(&root) {
                    // SAFETY: kill(2) has no memory effects; the pid carries this world's marker.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            })
        };
        Self {
            dir,
            wrapper,
            _turn: turn,
            _on_timeout: on_timeout,
        }
    }

    fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn mux_config(&self) -> MuxConfig {
        MuxConfig {
            zellij_bin: self.wrapper.clone(),
            submit_delay: SUBMIT_DELAY,
            ..MuxConfig::default()
        }
    }

    /// One zellij call, bounded by [`CALL_TIMEOUT`]: zellij 0.45.1's client can wait for ever
    /// for a reply its server lost under load (seen once in a fresh-clone run: a test held past
    /// the suite's 180 s bound). A call that runs out is killed and reads as failed, so the
    /// waits around it ask again, as the daemon's own bounded calls do.
    fn run(&self, args: &[&str]) -> Output {
        // ETXTBSY: another test thread's fork may still hold a copy of the descriptor that
        // wrote the wrapper; it goes away at that child's exec.
        for _ in 0..20 {
            let spawned = Command::new(&self.wrapper)
                .args(args)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn();
            let mut child = match spawned {
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
                other => other.expect("run zellij"),
            };
            let started = Instant::now();
            while child.try_wait().expect("wait for zellij").is_none() {
                if started.elapsed() > CALL_TIMEOUT {
                    let _ = child.kill();
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            return child.wait_with_output().expect("zellij output");
        }
        panic!("the zellij wrapper stayed busy (ETXTBSY)");
    }

    /// Run a zellij command that must succeed; returns stdout, trimmed.
    fn zellij(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "zellij {args:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Start a detached session and wait until it lists its first terminal pane.
    fn start_session(&self) -> String {
        let name = format!(
            "wb{}-{}",
            std::process::id(),
            SESSIONS.fetch_add(1, Ordering::Relaxed)
        );
        self.zellij(&["attach", "--create-background", &name]);
        common::eventually_blocking(
            &format!("session {name} lists a terminal pane"),
            START_TIMEOUT,
            || {
                self.panes(&name)
                    .iter()
                    .any(|p| p["is_plugin"] == json!(false))
            },
        );
        name
    }

    /// `list-panes --json` of a session, or nothing when it cannot be read yet.
    fn panes(&self, session: &str) -> Vec<serde_json::Value> {
        let out = self.run(&["--session", session, "action", "list-panes", "--json"]);
        serde_json::from_slice(&out.stdout).unwrap_or_default()
    }

    /// Open a pane named `name` running `command` with `sh -c`; returns its `terminal_N` id.
    /// The id is read back from `list-panes` by the pane's name: zellij 0.45.1 under load
    /// sometimes exits 0 from `run` without printing the id (the reply is lost the same way as
    /// in `list-sessions`, see `LISTING_ATTEMPTS` in src/mux/zellij.rs).
    fn run_pane(&self, session: &str, name: &str, command: &str) -> String {
        // Right after its creation a listed session can still answer `run` with "There is no
        // active session!" (0.45.1, under load): wait until it takes the command.
        let mut answer = None;
        common::eventually_blocking(
            &format!("session {session} takes `run`"),
            START_TIMEOUT,
            || {
                let out = self.run(&[
                    "--session",
                    session,
                    "run",
                    "--name",
                    name,
                    "--",
                    "sh",
                    "-c",
                    command,
                ]);
                let taken = out.status.success()
                    || !String::from_utf8_lossy(&out.stderr).contains("There is no active session");
                if taken {
                    answer = Some(out);
                }
                taken
            },
        );
        let out = answer.expect("run answered");
        assert!(
            out.status.success(),
            "zellij run failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let printed = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let mut id = None;
        common::eventually_blocking(&format!("pane {name} is listed"), START_TIMEOUT, || {
            id = self
                .panes(session)
                .iter()
                .find(|p| p["is_plugin"] == json!(false) && p["title"] == json!(name))
                .and_then(|p| p["id"].as_u64());
            id.is_some()
        });
        let pane = format!("terminal_{}", id.unwrap_or_default());
        assert!(
            printed.is_empty() || printed == pane,
            "zellij run printed {printed:?} for {pane}"
        );
        pane
    }

    /// Does zellij report the pane named `name` as exited (held with its exit status)?
    fn exited(&self, session: &str, name: &str) -> bool {
        self.panes(session)
            .iter()
            .any(|p| p["title"] == json!(name) && p["exited"] == json!(true))
    }

    /// A pane that puts its terminal in raw mode and records every byte it receives; returns
    /// its id and the recording once the recorder runs (the file exists only after `stty`).
    fn recorder(&self, session: &str, name: &str) -> (String, PathBuf) {
        let file = self.dir().join(name);
        let pane = self.run_pane(
            session,
            name,
            &format!("stty raw -echo; exec cat > '{}'", file.display()),
        );
        common::eventually_blocking(&format!("recorder {name} starts"), START_TIMEOUT, || {
            file.exists()
        });
        (pane, file)
    }

    /// The scripted agent TUI (`fake_agent.py`) in mode `mode` with `typed` on its prompt line;
    /// returns its pane and record file once its prompt is on screen.
    fn agent(&self, session: &str, name: &str, mode: &str, typed: &str) -> (String, PathBuf) {
        let record = self.dir().join(format!("{name}.rec"));
        let control = self.dir().join(format!("{name}.ctl"));
        std::fs::write(&control, mode).expect("control");
        let command = format!(
            "exec python3 '{}' '{}' '{}' '{typed}'",
            common::FAKE_AGENT,
            record.display(),
            control.display()
        );
        let pane = self.run_pane(session, name, &command);
        common::eventually_blocking(
            &format!("agent {name} draws its prompt"),
            START_TIMEOUT,
            || {
                let out = self.run(&["--session", session, "action", "dump-screen", "-p", &pane]);
                String::from_utf8_lossy(&out.stdout).contains('\u{276f}')
            },
        );
        (pane, record)
    }

    /// Every live process started through this world's wrapper (found by its marker).
    fn own_processes(&self) -> Vec<i32> {
        processes_marked_with(self.dir())
    }
}

/// Every live process whose environment carries the marker of the world in `dir`.
fn processes_marked_with(dir: &Path) -> Vec<i32> {
    let mut marker = OsString::from(MARKER_VAR);
    marker.push("=");
    marker.push(dir);
    let marker = marker.into_encoded_bytes();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|b| *b == 0).any(|var| var == marker.as_slice()))
                .unwrap_or(false)
        })
        .collect()
}

impl Drop for ZellijWorld {
    fn drop(&mut self) {
        let _ = self.run(&["kill-all-sessions", "--yes"]);
        let start = Instant::now();
        loop {
            let left = self.own_processes();
            if left.is_empty() || start.elapsed() > KILL_TIMEOUT {
                break;
            }
            for pid in left {
                // SAFETY: kill(2) has no memory effects; the pid carries this world's marker.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
            std::thread::sleep(POLL_EVERY);
        }
    }
}

async fn inject(world: &ZellijWorld, target: &PaneTarget) -> Result<&'static str, InjectError> {
    Injector::new(&world.mux_config())
        .inject(
            &CLAUDE,
            None,
            target,
            &KeystrokeText::wake_prompt(),
            Deadline::after(INJECT_BUDGET),
        )
        .await
}

fn expected_wake() -> String {
    format!("{WAKE_PROMPT}\r")
}

/// What a recorder got, after waiting for `len` bytes (or the settle timeout) and a bit more.
fn recorded(file: &Path, len: usize) -> String {
    String::from_utf8_lossy(&read_when_settled(file, len)).into_owned()
}

fn assert_stale(outcome: Result<&'static str, InjectError>, want: &StaleReason) {
    match outcome {
        Err(InjectError::StalePane { reason }) => assert_eq!(&reason, want),
        other => panic!("expected stale pane ({want:?}), got {other:?}"),
    }
}

#[tokio::test]
async fn real_zellij_gets_the_wake_prompt_then_one_carriage_return() {
    let Some(bin) = zellij_or_skip("real_zellij_gets_the_wake_prompt") else {
        return;
    };
    let world = ZellijWorld::new(&bin);
    let session = world.start_session();
    let (pane, file) = world.recorder(&session, "rec");

    let started = std::time::Instant::now();
    let done = Injector::new(&world.mux_config())
        .inject(
            &CLAUDE,
            None,
            &zellij_target(&session, &pane),
            &KeystrokeText::wake_prompt(),
            Deadline::after(INJECT_BUDGET),
        )
        .await
        .expect("inject");

    assert_eq!(done, "zellij");
    assert_eq!(recorded(&file, expected_wake().len()), expected_wake());
    eprintln!(
        "real zellij injection (4 calls + {SUBMIT_DELAY:?} submit delay) took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn real_zellij_screen_is_read_back_a_lost_enter_is_repeated_and_a_draft_is_left_alone() {
    let Some(bin) = zellij_or_skip("real_zellij_screen_is_read_back") else {
        return;
    };
    let world = ZellijWorld::new(&bin);
    let session = world.start_session();
    // The agent drops the first Enter: the read-back sees the text still there and presses
    // Enter once more.
    let (deaf, deaf_record) = world.agent(&session, "deaf", "deaf1", "");
    assert_eq!(
        inject(&world, &zellij_target(&session, &deaf))
            .await
            .expect("inject"),
        "zellij"
    );
    assert_eq!(
        recorded(&deaf_record, expected_wake().len() + 1),
        format!("{WAKE_PROMPT}\r\r")
    );
    let submits =
        std::fs::read_to_string(deaf_record.with_extension("rec.submits")).expect("submits");
    assert_eq!(submits.lines().count(), 1, "{submits}");
    assert!(
        submits.ends_with(&format!("\t{WAKE_PROMPT}\n")),
        "{submits}"
    );
    // Someone's draft on the prompt line: nothing typed.
    let (draft, draft_record) = world.agent(&session, "draft", "idle", "half a thought");
    let held = inject(&world, &zellij_target(&session, &draft)).await;
    assert!(matches!(held, Err(InjectError::Occupied)), "{held:?}");
    assert_eq!(recorded(&draft_record, 1), "");
}

#[tokio::test]
async fn real_zellij_accepts_the_pane_id_with_and_without_its_prefix() {
    let Some(bin) = zellij_or_skip("real_zellij_accepts_the_pane_id_with_and_without") else {
        return;
    };
    let world = ZellijWorld::new(&bin);
    let session = world.start_session();
    let (pane, file) = world.recorder(&session, "rec");
    let bare = pane
        .strip_prefix("terminal_")
        .unwrap_or_else(|| panic!("zellij run printed {pane:?}, not terminal_N"));

    for id in [pane.as_str(), bare] {
        inject(&world, &zellij_target(&session, id))
            .await
            .unwrap_or_else(|e| panic!("{id}: {e}"));
    }

    let want = expected_wake().repeat(2);
    assert_eq!(recorded(&file, want.len()), want);
}

#[tokio::test]
async fn real_zellij_without_any_server_is_session_missing() {
    let Some(bin) = zellij_or_skip("real_zellij_without_any_server") else {
        return;
    };
    let world = ZellijWorld::new(&bin);

    let outcome = inject(&world, &zellij_target("tenacious-lemur", "terminal_0")).await;

    assert_stale(
        outcome,
        &StaleReason::SessionMissing {
            session: "tenacious-lemur".into(),
        },
    );
}

#[tokio::test]
async fn real_zellij_missing_session_is_stale_and_types_nothing() {
    let Some(bin) = zellij_or_skip("real_zellij_missing_session_is_stale") else {
        return;
    };
    let world = ZellijWorld::new(&bin);
    let session = world.start_session();
    let (pane, file) = world.recorder(&session, "rec");

    // An unknown name, and a prefix of the live one: neither may reach the live session.
    for wrong in [
        "no-such-session".to_owned(),
        session[..session.len() - 1].to_owned(),
    ] {
        let outcome = inject(&world, &zellij_target(&wrong, &pane)).await;
        assert_stale(outcome, &StaleReason::SessionMissing { session: wrong });
    }

    assert_eq!(recorded(&file, 1), "", "something was typed");
}

#[tokio::test]
async fn real_zellij_missing_pane_is_stale_and_types_nothing() {
    let Some(bin) = zellij_or_skip("real_zellij_missing_pane_is_stale") else {
        return;
    };
    let world = ZellijWorld::new(&bin);
    let session = world.start_session();
    let (_, file) = world.recorder(&session, "rec");

    for missing in ["terminal_99", "99", "plugin_999"] {
        let outcome = inject(&world, &zellij_target(&session, missing)).await;
        assert_stale(outcome, &StaleReason::PaneMissing);
    }

    assert_eq!(recorded(&file, 1), "", "something was typed");
}

#[tokio::test]
async fn real_zellij_exited_pane_is_stale() {
    let Some(bin) = zellij_or_skip("real_zellij_exited_pane_is_stale") else {
        return;
    };
    let world = ZellijWorld::new(&bin);
    let session = world.start_session();
    let pane = world.run_pane(&session, "short-lived", "exit 3");
    common::eventually_blocking("the pane's program exits", START_TIMEOUT, || {
        world.exited(&session, "short-lived")
    });

    let outcome = inject(&world, &zellij_target(&session, &pane)).await;

    assert_stale(outcome, &StaleReason::PaneDead);
}

#[tokio::test]
async fn real_zellij_session_gone_after_the_listing_is_session_missing() {
    let Some(bin) = zellij_or_skip("real_zellij_session_gone_after_the_listing") else {
        return;
    };
    let world = ZellijWorld::new(&bin);
    // The listing still names the session (it ended right after); everything else is real,
    // so the real `list-panes` refusal decides, once with no server at all, once with another
    // session running.
    let lagging = world.dir().join("lagging-zellij");
    std::fs::write(
        &lagging,
        format!(
            "#!/bin/sh\n\
             if [ \"$1\" = list-sessions ]; then echo 'ghost [Created 1s ago] '; exit 0; fi\n\
             exec '{}' \"$@\"\n",
            world.wrapper.display()
        ),
    )
    .expect("script");
    std::fs::set_permissions(&lagging, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let injector = Injector::new(&MuxConfig {
        zellij_bin: lagging,
        ..world.mux_config()
    });
    let want = StaleReason::SessionMissing {
        session: "ghost".into(),
    };

    for round in ["no server", "another session"] {
        if round == "another session" {
            world.start_session();
        }
        let outcome = injector
            .inject(
                &CLAUDE,
                None,
                &zellij_target("ghost", "terminal_0"),
                &KeystrokeText::wake_prompt(),
                Deadline::after(INJECT_BUDGET),
            )
            .await;
        match outcome {
            Err(InjectError::StalePane { reason }) => assert_eq!(reason, want, "{round}"),
            other => panic!("{round}: expected a missing session, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn real_daemon_wakes_a_session_mapped_to_a_real_zellij_pane() {
    let Some(bin) = zellij_or_skip("real_daemon_wakes_a_session_mapped_to_a_real_zellij") else {
        return;
    };
    let world = ZellijWorld::new(&bin);
    let session = world.start_session();
    let (pane, file) = world.recorder(&session, "rec");
    let wrapper = world.wrapper.display().to_string();
    let server = TestServer::start(&[
        ("AGENT_EVENT_BUS_BRIDGE_BACKEND", "mux"),
        ("WAKEBRIDGE_MUX__ZELLIJ_BIN", wrapper.as_str()),
        ("WAKEBRIDGE_MUX__SUBMIT_DELAY", "100ms"),
    ])
    .await;
    std::fs::create_dir_all(&server.wake_dir).expect("wake dir");
    let panes = json!({
        "target-1": {"mux": "zellij", "pane": pane, "session": session},
        "stale-1": {"mux": "zellij", "pane": "terminal_99", "session": session},
    });
    std::fs::write(server.wake_dir.join("panes.json"), panes.to_string()).expect("panes.json");

    let (status, body) = server.hook(DEFAULT_EVENT, &[]).await;
    assert_eq!(
        (status, body),
        (
            200,
            json!({"status": "delivered", "action": "zellij", "session_id": "target-1"})
        )
    );
    assert_eq!(recorded(&file, expected_wake().len()), expected_wake());

    let stale_event = DEFAULT_EVENT
        .replace("session:target-1", "session:stale-1")
        .replace(r#""event_id":1"#, r#""event_id":2"#);
    let (_, body) = server.hook(stale_event, &[]).await;
    assert_eq!(body["action"], "spool-stale-pane", "{body}");
    assert_eq!(server.spool_lines("stale-1").len(), 1);
    assert_eq!(
        std::fs::read_to_string(&file).expect("recording"),
        expected_wake(),
        "the stale mapping typed into the live pane"
    );
}
