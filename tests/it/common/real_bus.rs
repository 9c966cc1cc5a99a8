//! The REAL agent-event-bus (the Python MCP server vendored at ../shared/vendor/agent-event-bus)
//! as a child process, for tests that must agree with the bus itself rather than with the stub
//! ([`super::stub_bus`]): on a free 127.0.0.1 port, with a private database, log, HOME and TMPDIR
//! in a temporary directory, stoppable and restartable on the same port and database, killed
//! when dropped.
//!
//! The binary is `$WB_TEST_BUS` when set (and then only it), else `agent-event-bus` on PATH, else
//! the venv `.ci/run` installs (`~/.cache/wakebridge-ci/agent-event-bus`), else VENDORED.md's
//! `/tmp/aeb-venv`. Without one, [`RealBus::start_or_skip`] skips the test with a note, or fails
//! it in CI ([`super::skip_or_fail`]).
//!
//! The bus takes its settings from the environment only: `PORT` (default 8080), `HOST` (default
//! 127.0.0.1), `AGENT_EVENT_BUS_DB` and `AGENT_EVENT_BUS_LOG` (both default under
//! `~/.claude/contrib/agent-event-bus`). It answers `GET /health` on its event loop, without
//! touching storage, once uvicorn listens: about 2 s after the start on 2 loaded cores, nearly
//! all of it Python importing FastMCP.

use std::fs::File;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::harness::free_port;
use super::process::{ChildGuard, process_is_running};

/// The environment variable that names the bus binary explicitly (and then exclusively).
pub const BUS_ENV: &str = "WB_TEST_BUS";

/// Where `.ci/run` installs the vendored bus, under `$HOME`.
const CI_INSTALL: &str = ".cache/wakebridge-ci/agent-event-bus/bin/agent-event-bus";

/// Where VENDORED.md's instructions install it.
const VENDORED_MD_INSTALL: &str = "/tmp/aeb-venv/bin/agent-event-bus";

/// How to get a bus, for [`super::skip_or_fail`].
pub const GET_BUS: &str = "set WB_TEST_BUS to an agent-event-bus binary, put one on PATH, or \
                           install the vendored one as ../shared/vendor/agent-event-bus/VENDORED.md \
                           says (.ci/run installs it into ~/.cache/wakebridge-ci/agent-event-bus)";

/// How long the bus may take to listen and answer `/health`: ~2 s normally, far more on a
/// loaded machine or a first start that compiles the venv's bytecode.
const STARTUP_LIMIT: Duration = Duration::from_secs(20);

/// How long [`RealBus::stop`] waits for SIGTERM (uvicorn's graceful shutdown) before SIGKILL.
const STOP_PATIENCE: Duration = Duration::from_secs(5);

/// How many free ports a first start tries: another process may take the one picked while
/// Python imports.
const START_ATTEMPTS: u32 = 3;

/// How much of the bus's output and log a failure quotes.
const TAIL_LINES: usize = 40;

const POLL: Duration = Duration::from_millis(50);

/// The bus binary the tests use, or what is missing.
pub fn find_bus() -> Result<PathBuf, String> {
    if let Some(explicit) = std::env::var_os(BUS_ENV).filter(|v| !v.is_empty()) {
        let explicit = PathBuf::from(explicit);
        return match is_executable(&explicit) {
            true => Ok(explicit),
            false => Err(format!(
                "{BUS_ENV}={} is not an executable file",
                explicit.display()
            )),
        };
    }
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("agent-event-bus"))
            .find(|p| is_executable(p))
    });
    let ci_install = std::env::var_os("HOME").map(|home| PathBuf::from(home).join(CI_INSTALL));
    on_path
        .into_iter()
        .chain(ci_install)
        .chain(Some(PathBuf::from(VENDORED_MD_INSTALL)))
        .find(|p| is_executable(p))
        .ok_or_else(|| {
            format!(
                "no agent-event-bus ({BUS_ENV} unset, none on PATH, none in \
                 ~/{CI_INSTALL} or {VENDORED_MD_INSTALL})"
            )
        })
}

fn is_executable(path: &Path) -> bool {
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Why a start did not come up.
enum StartFailure {
    /// uvicorn could not bind the port: someone else has it.
    PortTaken(String),
    Other(String),
}

/// A running (or stopped) real bus. Killed, with its process group, when dropped.
pub struct RealBus {
    bin: PathBuf,
    port: u16,
    /// Starts so far, numbering each start's output file.
    starts: u32,
    child: Option<ChildGuard>,
    dir: tempfile::TempDir,
}

impl RealBus {
    /// Starts the bus [`find_bus`] finds; without one, skips the test with a note (returns
    /// `None`) or, in CI, fails it.
    pub async fn start_or_skip() -> Option<RealBus> {
        match find_bus() {
            Ok(bin) => Some(Self::start(&bin).await),
            Err(missing) => {
                let thread = std::thread::current();
                let test = thread.name().unwrap_or("this test");
                super::skip_or_fail(&format!("{test}: {missing}"), GET_BUS);
                None
            }
        }
    }

    /// Starts `bin` on a free port with a fresh database; fails the test, quoting the bus's
    /// output and log, if it does not answer within [`STARTUP_LIMIT`].
    pub async fn start(bin: &Path) -> RealBus {
        let dir = super::tempdir();
        for private in ["home", "tmp"] {
            std::fs::create_dir_all(dir.path().join(private)).expect("private dirs for the bus");
        }
        let mut bus = RealBus {
            bin: bin.to_owned(),
            port: 0,
            starts: 0,
            child: None,
            dir,
        };
        for attempt in 1..=START_ATTEMPTS {
            bus.port = free_port();
            match bus.launch().await {
                Ok(()) => return bus,
                Err(StartFailure::PortTaken(_)) if attempt < START_ATTEMPTS => continue,
                Err(StartFailure::PortTaken(why) | StartFailure::Other(why)) => panic!("{why}"),
            }
        }
        unreachable!("the last attempt returns or panics")
    }

    /// The MCP endpoint, `http://127.0.0.1:<port>/mcp`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The bus's SQLite database (`AGENT_EVENT_BUS_DB`); it outlives stops and restarts.
    pub fn db_path(&self) -> PathBuf {
        self.dir.path().join("bus.db")
    }

    /// The bus's own log (`AGENT_EVENT_BUS_LOG`): one line per tool call.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("bus.log")
    }

    /// The bus's pid while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.0.id())
    }

    /// Stops the bus as a service manager would: SIGTERM (uvicorn shuts down gracefully), then
    /// SIGKILL after [`STOP_PATIENCE`]. The database stays.
    pub async fn stop(&mut self) {
        let Some(pid) = self.pid() else {
            return;
        };
        self.signal(libc::SIGTERM);
        let asked = Instant::now();
        while asked.elapsed() < STOP_PATIENCE && group_runs(pid) {
            tokio::time::sleep(POLL).await;
        }
        self.reap();
    }

    /// Kills the bus (SIGKILL, its whole process group), as a crash would. The database stays.
    pub fn kill(&mut self) {
        self.reap();
    }

    /// Stops the bus if it runs ([`RealBus::stop`]) and starts it again on the same port and
    /// database.
    pub async fn restart(&mut self) {
        self.stop().await;
        if let Err(StartFailure::PortTaken(why) | StartFailure::Other(why)) = self.launch().await {
            panic!("restarting the bus on the same port and database: {why}");
        }
    }

    /// Stops the bus and starts it again on the same port with a fresh database, as a bus
    /// moved or reinstalled would come back: no sessions, no webhooks, no events.
    pub async fn restart_fresh(&mut self) {
        self.stop().await;
        for suffix in ["", "-wal", "-shm"] {
            let path = format!("{}{suffix}", self.db_path().display());
            let _ = std::fs::remove_file(path);
        }
        if let Err(StartFailure::PortTaken(why) | StartFailure::Other(why)) = self.launch().await {
            panic!("restarting the bus on the same port with a fresh database: {why}");
        }
    }

    /// SIGKILLs what is left of the bus's group (all of it, after a crash or a stop: the
    /// unreaped leader keeps the group id from being reused) and reaps the bus.
    fn reap(&mut self) -> String {
        self.signal(libc::SIGKILL);
        match self.child.take() {
            Some(mut child) => child
                .0
                .wait()
                .map_or_else(|e| format!("unknown status: {e}"), |s| s.to_string()),
            None => "not running".to_owned(),
        }
    }

    /// Sends `signal` to the bus's process group (its own: spawned with `process_group(0)`).
    fn signal(&self, signal: libc::c_int) {
        if let Some(pgid) = self.pid().and_then(|pid| libc::pid_t::try_from(pid).ok()) {
            // SAFETY: kill(2) on the group of a child this process started and has not reaped.
            unsafe { libc::kill(-pgid, signal) };
        }
    }

    /// Spawns the bus on `self.port` and waits until that process listens there and answers
    /// `/health`.
    async fn launch(&mut self) -> Result<(), StartFailure> {
        self.starts += 1;
        let out = File::create(self.output_path(self.starts)).expect("bus output file");
        let dir = self.dir.path();
        let mut cmd = Command::new(&self.bin);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", dir.join("home"))
            .env("TMPDIR", dir.join("tmp"))
            .env("HOST", "127.0.0.1")
            .env("PORT", self.port.to_string())
            .env("AGENT_EVENT_BUS_DB", self.db_path())
            .env("AGENT_EVENT_BUS_LOG", self.log_path())
            // Its startup lines reach the file before a kill.
            .env("PYTHONUNBUFFERED", "1")
            .current_dir(dir)
            .stdin(Stdio::null())
            // Both streams into one file, in order.
            .stdout(out.try_clone().expect("bus output file"))
            .stderr(out)
            // A group of its own: a wrapper script's children are stopped with it, and the
            // test timeout's cleanup kills the group.
            .process_group(0);
        let child = cmd.spawn().unwrap_or_else(|e| {
            panic!("could not run the bus {}: {e}", self.bin.display());
        });
        let pid = child.id();
        self.child = Some(ChildGuard::new(child));
        let health = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .no_proxy()
            .build()
            .expect("an HTTP client");
        let started = Instant::now();
        loop {
            if !running(pid) {
                let status = self.reap();
                let why = self.failure(&format!("exited ({status})"), started);
                // uvicorn: "[Errno 98] error while attempting to bind on address (...): address
                // already in use".
                let taken = self
                    .output_tail(self.starts)
                    .contains("address already in use");
                return Err(match taken {
                    true => StartFailure::PortTaken(why),
                    false => StartFailure::Other(why),
                });
            }
            if group_listens_on(pid, self.port) && self.answers_health(&health).await {
                eprintln!(
                    "real agent-event-bus {} up on 127.0.0.1:{} in {:.1} s",
                    self.bin.display(),
                    self.port,
                    started.elapsed().as_secs_f64()
                );
                return Ok(());
            }
            if started.elapsed() > STARTUP_LIMIT {
                self.kill();
                return Err(StartFailure::Other(self.failure(
                    &format!("did not listen and answer /health (it may take {STARTUP_LIMIT:?})"),
                    started,
                )));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    async fn answers_health(&self, client: &reqwest::Client) -> bool {
        let url = format!("http://127.0.0.1:{}/health", self.port);
        let Ok(response) = client.get(url).send().await else {
            return false;
        };
        if !response.status().is_success() {
            return false;
        }
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        body["service"] == "agent-event-bus"
    }

    fn failure(&self, what: &str, started: Instant) -> String {
        format!(
            "the real agent-event-bus {} on 127.0.0.1:{} {what} after {:.1} s.\n\
             --- its stdout/stderr ({}), last {TAIL_LINES} lines:\n{}\n\
             --- its log ({}), last {TAIL_LINES} lines:\n{}",
            self.bin.display(),
            self.port,
            started.elapsed().as_secs_f64(),
            self.output_path(self.starts).display(),
            self.output_tail(self.starts),
            self.log_path().display(),
            tail(&self.log_path()),
        )
    }

    fn output_path(&self, start: u32) -> PathBuf {
        self.dir.path().join(format!("bus-output-{start}.txt"))
    }

    fn output_tail(&self, start: u32) -> String {
        tail(&self.output_path(start))
    }
}

impl Drop for RealBus {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether the bus `pid` runs: not yet a zombie.
fn running(pid: u32) -> bool {
    i32::try_from(pid).is_ok_and(process_is_running)
}

/// The last [`TAIL_LINES`] lines of `path`, or a note that there is none.
fn tail(path: &Path) -> String {
    match std::fs::read(path) {
        Err(e) => format!("(none: {e})"),
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n")
        }
    }
}

/// Whether a process of the group `pgid` holds the socket listening on 127.0.0.1:`port`: the
/// bus this test started, not another that took the port while Python imported (another test's
/// bus answers `/health` just as well).
fn group_listens_on(pgid: u32, port: u16) -> bool {
    let Some(inode) = listening_inode(port) else {
        return false;
    };
    let socket = format!("socket:[{inode}]");
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return false;
    };
    procs
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| process_group_of(*pid) == Some(pgid))
        .any(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
                fds.filter_map(Result::ok).any(|fd| {
                    std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == &*socket)
                })
            })
        })
}

/// Whether a process of the group `pgid` still runs (not yet a zombie).
fn group_runs(pgid: u32) -> bool {
    std::fs::read_dir("/proc").is_ok_and(|procs| {
        procs
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .any(|pid| process_group_of(pid) == Some(pgid) && running(pid))
    })
}

/// The inode of the socket listening on 127.0.0.1:`port`, from /proc/net/tcp.
fn listening_inode(port: u16) -> Option<String> {
    const LISTEN: &str = "0A";
    let local = format!("0100007F:{port:04X}");
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match (fields.get(1), fields.get(3), fields.get(9)) {
            (Some(addr), Some(state), Some(inode)) if *addr == local && *state == LISTEN => {
                Some((*inode).to_owned())
            }
            _ => None,
        }
    })
}

/// A process's group, from /proc/<pid>/stat (after the parenthesised name: state, ppid, pgrp).
fn process_group_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(2)?.parse().ok()
}
