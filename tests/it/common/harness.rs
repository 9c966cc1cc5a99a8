//! Starting the real daemon for a test: in-process through `App::build` (the code `serve` runs)
//! on an ephemeral port with private temp dirs, or as the real binary for process-level tests.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use wakebridge::app::App;
use wakebridge::config::{self, Flags};

use super::env::test_env;
use super::process::ChildGuard;

/// A running daemon; stopped when dropped.
pub struct TestServer {
    pub addr: SocketAddr,
    pub wake_dir: PathBuf,
    pub root: std::sync::Arc<tempfile::TempDir>,
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<Result<(), wakebridge::app::AppError>>>,
    pub client: reqwest::Client,
}

pub const DEFAULT_EVENT: &str = r#"{"event_id":1,"event_type":"help_needed","payload":"need a review","session_id":"sender-1","timestamp":"2026-08-08T00:00:00","channel":"session:target-1","correlation_id":null,"signal_level":"actionable"}"#;

/// [`DEFAULT_EVENT`] for session `sid` with event id `id`.
pub fn event_for(sid: &str, id: impl std::fmt::Display) -> String {
    DEFAULT_EVENT
        .replace("session:target-1", &format!("session:{sid}"))
        .replace(r#""event_id":1"#, &format!(r#""event_id":{id}"#))
}

/// POSTs `body` to `http://<addr>/hook` (at most 10 s): the status, the body as JSON and how long
/// the answer took. Status 0 means no answer (a killed daemon): the JSON is then the error text.
pub async fn post_hook(
    client: &reqwest::Client,
    addr: &str,
    body: String,
) -> (u16, serde_json::Value, Duration) {
    let started = Instant::now();
    let resp = client
        .post(format!("http://{addr}/hook"))
        .header("content-type", "application/json")
        .body(body)
        .timeout(Duration::from_secs(10))
        .send()
        .await;
    match resp {
        Ok(resp) => {
            let status = resp.status().as_u16();
            let json = resp.json().await.unwrap_or(serde_json::Value::Null);
            (status, json, started.elapsed())
        }
        Err(e) => (
            0,
            serde_json::Value::String(e.to_string()),
            started.elapsed(),
        ),
    }
}

impl TestServer {
    pub async fn start(extra_env: &[(&str, &str)]) -> TestServer {
        Self::start_with(extra_env, Flags::default()).await
    }

    pub async fn start_with(extra_env: &[(&str, &str)], flags: Flags) -> TestServer {
        let root = std::sync::Arc::new(tempfile::tempdir().expect("tempdir"));
        Self::start_in(root, extra_env, flags).await
    }

    /// Starts on an existing root (its wake dir, ledger and locks), e.g. after `stop`.
    pub async fn start_in(
        root: std::sync::Arc<tempfile::TempDir>,
        extra_env: &[(&str, &str)],
        mut flags: Flags,
    ) -> TestServer {
        super::timeout::arm_test_timeout();
        std::fs::create_dir_all(root.path().join("run")).expect("run dir");
        let env = wakebridge::env::Env::from(test_env(root.path(), extra_env));
        // A port the caller chose is kept (a bus must be told where to post); otherwise the
        // configuration says 8082 and the listener takes any free port.
        let any_port = flags.port.is_none();
        if any_port {
            flags.port = Some("8082".into());
        }
        let mut config = config::resolve(&flags, &env).expect("test config is valid");
        if any_port {
            config.port = 0;
        }
        let wake_dir = config.paths.wake_dir.clone();
        // Right after a `stop`, a child another test thread is forking holds a copy of the
        // released locks' descriptors until it execs: wait for them to be free, as a restarted
        // daemon (a new process, no such copies) finds them.
        let freed_by = std::time::Instant::now() + std::time::Duration::from_secs(2);
        let app = loop {
            let settings = wakebridge::app::Validated::new(config.clone())
                .unwrap_or_else(|e| panic!("test settings are valid: {e}"));
            match App::build(settings, &env).await {
                Ok(app) => break app,
                Err(wakebridge::app::AppError::Singleton(_))
                    if std::time::Instant::now() < freed_by =>
                {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                Err(e) => panic!("app builds: {e}"),
            }
        };
        let addr = app.local_addr();
        let shutdown = CancellationToken::new();
        let task = Some(tokio::spawn(app.run(shutdown.clone())));
        TestServer {
            addr,
            wake_dir,
            root,
            shutdown,
            task,
            client: reqwest::Client::new(),
        }
    }

    /// Stops the daemon and waits until it has released its locks and ledger.
    pub async fn stop(mut self) -> std::sync::Arc<tempfile::TempDir> {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        self.root.clone()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// POSTs JSON to /hook and returns (status, body as JSON or Null).
    pub async fn hook(
        &self,
        body: impl Into<reqwest::Body>,
        headers: &[(&str, &str)],
    ) -> (u16, serde_json::Value) {
        let mut req = self
            .client
            .post(self.url("/hook"))
            .header("content-type", "application/json")
            .body(body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        let json = resp.json().await.unwrap_or(serde_json::Value::Null);
        (status, json)
    }

    /// POSTs `body` as JSON to `path`; returns the status and the JSON answer (null if none).
    pub async fn post_json(&self, path: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
        let response = self
            .client
            .post(self.url(path))
            .json(&body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {path}: {e}"));
        let status = response.status().as_u16();
        (
            status,
            response.json().await.unwrap_or(serde_json::Value::Null),
        )
    }

    /// GETs `path` and returns the body as JSON.
    pub async fn get_json(&self, path: &str) -> serde_json::Value {
        serde_json::from_str(&self.get_text(path).await).expect("JSON body")
    }

    /// GETs `path` and returns the body as text.
    pub async fn get_text(&self, path: &str) -> String {
        let resp = self
            .client
            .get(self.url(path))
            .send()
            .await
            .expect("request");
        resp.text().await.expect("text body")
    }

    /// `sid`'s entry in `/sessions` (`Null` while the daemon does not know it).
    pub async fn session(&self, sid: &str) -> serde_json::Value {
        let body = self.get_json("/sessions").await;
        body["sessions"]
            .as_array()
            .and_then(|all| all.iter().find(|s| s["session_id"] == sid).cloned())
            .unwrap_or(serde_json::Value::Null)
    }

    /// Waits up to `limit` until `sid`'s entry in `/sessions` satisfies `done`; returns it.
    /// `context` (the screen, a model's transcript) is added to the failure message.
    pub async fn session_until(
        &self,
        sid: &str,
        what: &str,
        limit: std::time::Duration,
        done: impl Fn(&serde_json::Value) -> bool,
        context: impl Fn() -> String,
    ) -> serde_json::Value {
        super::eventually_ok(what, limit, async || {
            let status = self.session(sid).await;
            if done(&status) {
                Ok(status)
            } else {
                Err(format!("{status}\n{}", context()))
            }
        })
        .await
    }

    pub fn spool_lines(&self, sid: &str) -> Vec<String> {
        std::fs::read_to_string(self.wake_dir.join(format!("{sid}.jsonl")))
            .map(|t| t.lines().map(str::to_string).collect())
            .unwrap_or_default()
    }

    /// Every file name in the wake dir, sorted.
    pub fn wake_files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.wake_dir)
            .map(|d| {
                d.filter_map(std::result::Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Sends raw bytes over a fresh connection and returns whatever the server answered.
pub fn raw_request(addr: SocketAddr, bytes: &[u8], half_close: bool) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    stream.write_all(bytes).expect("write");
    if half_close {
        let _ = stream.shutdown(std::net::Shutdown::Write);
    }
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The status code of a raw HTTP response.
pub fn status_of(response: &str) -> u16 {
    response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// The real binary with a private environment (nothing inherited but PATH).
pub fn binary(root: &Path, extra_env: &[(&str, &str)]) -> std::process::Command {
    super::timeout::arm_test_timeout();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_wakebridge"));
    cmd.env_clear();
    cmd.env("PATH", std::env::var_os("PATH").unwrap_or_default());
    for (k, v) in test_env(root, extra_env) {
        cmd.env(k, v);
    }
    cmd
}

/// Runs `cmd` with `input` on its stdin; what it printed and how it exited.
pub fn fed(mut cmd: std::process::Command, input: &str) -> std::process::Output {
    use std::io::Write as _;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // A child that exits without reading all of it is its own answer, not a test failure.
    let _ = child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes());
    child.wait_with_output().expect("wait")
}

/// Polls `url` until it answers or `timeout` passes.
pub async fn wait_healthy(client: &reqwest::Client, url: &str, timeout: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        if client
            .get(url)
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// The ledger a daemon started under `root` uses.
pub fn ledger_of(root: &Path) -> PathBuf {
    let env = wakebridge::env::Env::from(test_env(root, &[]));
    config::resolve(&config::Flags::default(), &env)
        .expect("test config is valid")
        .paths
        .ledger
}

/// Records, in one transaction, a delivery of a hook event to `sid` (action `spool`, now) for
/// each of `identities` in the ledger of `root`, whose daemon must be stopped: the rows a
/// daemon leaves after delivering that many events, written in seconds where posting them to
/// a debug build takes minutes.
pub async fn record_delivered(root: &Path, sid: &str, identities: impl Iterator<Item = String>) {
    use wakebridge::store::{Delivery, DeliverySource, Record, Store};
    let store = Store::open(&ledger_of(root)).expect("open the ledger");
    let at_ms = wakebridge::clock::now_ms();
    let rows = identities
        .map(|identity| {
            Record::Delivery(Delivery {
                at_ms,
                source: DeliverySource::Hook,
                identity: Some(identity),
                event_id: None,
                sender: "sender-1".into(),
                target_session: sid.into(),
                action: "spool".into(),
                spool_us: Some(100),
                inject_us: None,
                error_kind: None,
                owed: false,
            })
        })
        .collect();
    store.record_all(rows).await.expect("record the deliveries");
}

/// How long a spawned daemon may take to answer `/health`.
const STARTUP_LIMIT: Duration = Duration::from_secs(10);
/// How long a log line may trail the answer it goes with.
const LOG_PATIENCE: Duration = Duration::from_secs(5);

/// The real binary as a child process, its stderr in a log file: for tests that kill it,
/// restart it, or limit it before exec.
pub struct Daemon {
    pub child: ChildGuard,
    /// `127.0.0.1:<port>`.
    pub addr: String,
    pub log: PathBuf,
}

impl Daemon {
    /// Starts `serve` on a free port; `setup` runs in the child before exec (async-signal-safe
    /// calls only).
    pub fn spawn(root: &Path, extra_env: &[(&str, &str)], setup: Option<fn() -> i32>) -> Daemon {
        super::timeout::arm_test_timeout();
        std::fs::create_dir_all(root.join("run")).expect("run dir");
        let port = free_port();
        let log = root.join(format!("daemon-{port}.log"));
        let mut cmd = binary(root, extra_env);
        cmd.args(["serve", "--port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).expect("log file"));
        if let Some(setup) = setup {
            // SAFETY: the hook only calls async-signal-safe libc functions (setrlimit, signal).
            unsafe {
                cmd.pre_exec(move || match setup() {
                    0 => Ok(()),
                    _ => Err(std::io::Error::last_os_error()),
                });
            }
        }
        let child = cmd.spawn().expect("spawn wakebridge");
        Daemon {
            child: ChildGuard::new(child),
            addr: format!("127.0.0.1:{port}"),
            log,
        }
    }

    pub async fn wait_ready(&self, client: &reqwest::Client) {
        assert!(
            wait_healthy(
                client,
                &format!("http://{}/health", self.addr),
                STARTUP_LIMIT
            )
            .await,
            "daemon did not start; log:\n{}",
            self.log_text()
        );
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The daemon's log once it holds every one of `lines`: its log writer is a thread of its
    /// own, so a line may land just after the answer it goes with.
    pub async fn log_saying(&self, lines: &[&str]) -> String {
        let what = format!("the daemon's log to say {lines:?}");
        super::eventually_ok(&what, LOG_PATIENCE, async || {
            let log = self.log_text();
            match lines.iter().all(|line| log.contains(line)) {
                true => Ok(log),
                false => Err(format!("\n{log}")),
            }
        })
        .await
    }

    pub fn sigkill(&mut self) {
        let _ = self.child.0.kill();
        let _ = self.child.0.wait();
    }
}
