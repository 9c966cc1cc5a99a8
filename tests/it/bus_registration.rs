//! The bus client and the registration keeper against a stub bus that speaks the real bus's
//! wire (real HTTP on a loopback socket). Schedules use real time because the bus is a real
//! socket peer; the keeper runs with a short keep interval so these stay fast.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio_util::sync::CancellationToken;
use wakebridge::bus::registration::{
    self, RegistrationConfig, RegistrationStatus, SHUTDOWN_BUDGET,
};
use wakebridge::bus::{ACCEPT_BOTH, BusClient, BusError};

use crate::common;
use crate::common::stub_bus::{Behaviour, StubBus};

/// Keeper period for tests: short enough to keep the suite quick, long enough that a listing
/// (a few ms) never overlaps the next.
const TEST_KEEP_INTERVAL: Duration = Duration::from_millis(200);

/// Upper bound for "eventually" conditions; generous for a loaded 2-core machine.
const PATIENCE: Duration = Duration::from_secs(5);

const HOOK_URL: &str = "http://127.0.0.1:18082/hook";

// ---------------------------------------------------------------- helpers

/// Captures this thread's log lines (tests run on a current-thread runtime, so the keeper's
/// task logs on the same thread).
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    fn capture() -> (Self, tracing::subscriber::DefaultGuard) {
        let logs = Logs::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || writer.clone())
            .finish();
        let guard = tracing::subscriber::set_default(subscriber);
        (logs, guard)
    }

    fn text(&self) -> String {
        let bytes = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    fn count(&self, needle: &str) -> usize {
        self.text().matches(needle).count()
    }
}

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

async fn eventually(what: &str, condition: impl FnMut() -> bool) {
    common::eventually(what, PATIENCE, condition).await;
}

/// A keeper running against `bus`, stopped (and awaited) by `stop` or on drop.
struct Running {
    status: Arc<RegistrationStatus>,
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Running {
    fn start(bus_url: &str) -> Self {
        Self::start_with(config_for(bus_url), CancellationToken::new())
    }

    fn start_with(config: RegistrationConfig, shutdown: CancellationToken) -> Self {
        let status = Arc::new(RegistrationStatus::default());
        let task = tokio::spawn(registration::run(
            config,
            Arc::clone(&status),
            shutdown.clone(),
        ));
        Self {
            status,
            shutdown,
            task: Some(task),
        }
    }

    async fn registered_id(&self) -> i64 {
        eventually("registration", || self.status.snapshot().registered).await;
        self.status
            .snapshot()
            .webhook_id
            .expect("registered implies an id")
    }

    /// Requests shutdown and returns how long `run` took to return.
    async fn stop(mut self) -> Duration {
        let started = Instant::now();
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.await
                .expect("registration task ended without panicking");
        }
        started.elapsed()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

// ---------------------------------------------------------------- client: wire

#[tokio::test]
async fn client_sends_both_accept_types_where_one_gets_406() {
    let bus = StubBus::start().await;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_webhooks","arguments":{}}}"#;
    let single = reqwest::Client::new()
        .post(bus.url())
        .header("Content-Type", "application/json")
        .header("Accept", "application/json")
        .body(body)
        .send()
        .await
        .expect("stub answers");
    assert_eq!(single.status().as_u16(), 406);

    let client = BusClient::new(&bus.url()).expect("valid url");
    assert_eq!(client.list_webhooks().await.expect("listing"), vec![]);
    let sent = bus.requests().pop().expect("one request recorded");
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/mcp");
    assert_eq!(sent.accept.as_deref(), Some(ACCEPT_BOTH));
    assert_eq!(sent.content_type.as_deref(), Some("application/json"));
    assert_eq!(
        bus.calls_of("list_webhooks"),
        vec![json!({"active_only": false})]
    );
}

#[tokio::test]
async fn listing_unwraps_rows_newest_first_with_their_active_flags() {
    let bus = StubBus::start().await;
    let active = bus.insert_row("http://127.0.0.1:1/hoök", true);
    let paused = bus.insert_row("http://127.0.0.1:2/hook", false);
    let client = BusClient::new(&bus.url()).expect("valid url");
    let rows = client.list_webhooks().await.expect("listing");
    let seen: Vec<_> = rows
        .iter()
        .map(|r| (r.webhook_id, r.url.as_deref(), r.active))
        .collect();
    assert_eq!(
        seen,
        vec![
            (Some(paused), Some("http://127.0.0.1:2/hook"), false),
            (Some(active), Some("http://127.0.0.1:1/hoök"), true),
        ]
    );
}

#[tokio::test]
async fn listing_skips_elements_that_are_not_objects() {
    let bus = StubBus::start().await;
    bus.script(
        "list_webhooks",
        json!(["garbage", null, 42, {"webhook_id": 5, "url": "http://x/hook", "active": true}]),
    );
    let client = BusClient::new(&bus.url()).expect("valid url");
    let rows = client.list_webhooks().await.expect("listing");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].webhook_id, Some(5));
}

#[tokio::test]
async fn listing_that_is_not_a_list_is_an_error() {
    let bus = StubBus::start().await;
    bus.script("list_webhooks", json!({}));
    let client = BusClient::new(&bus.url()).expect("valid url");
    let err = client.list_webhooks().await.expect_err("not a list");
    assert!(matches!(err, BusError::Unusable { .. }), "{err:?}");
    assert!(err.to_string().contains("list_webhooks"), "{err}");
}

#[tokio::test]
async fn register_sends_the_secret_only_when_set() {
    let bus = StubBus::start().await;
    let client = BusClient::new(&bus.url()).expect("valid url");
    let first = client
        .register_webhook("http://127.0.0.1:9999/hook", "session:", Some("s3cret"))
        .await
        .expect("registered");
    let second = client
        .register_webhook("http://127.0.0.1:9999/hook", "session:", None)
        .await
        .expect("registered");
    assert_ne!(first, second);
    assert_eq!(
        bus.calls_of("register_webhook"),
        vec![
            json!({"url":"http://127.0.0.1:9999/hook","channel":"session:","secret":"s3cret"}),
            json!({"url":"http://127.0.0.1:9999/hook","channel":"session:"}),
        ]
    );
}

#[tokio::test]
async fn register_without_a_webhook_id_is_an_error() {
    let bus = StubBus::start().await;
    bus.script("register_webhook", json!({}));
    let client = BusClient::new(&bus.url()).expect("valid url");
    let err = client
        .register_webhook(HOOK_URL, "session:", None)
        .await
        .expect_err("no id");
    assert!(err.to_string().contains("no webhook_id"), "{err}");
}

#[tokio::test]
async fn unregister_of_a_missing_row_counts_as_removed() {
    let bus = StubBus::start().await;
    let id = bus.insert_row(HOOK_URL, true);
    let client = BusClient::new(&bus.url()).expect("valid url");
    client.unregister_webhook(id).await.expect("removed");
    assert!(bus.rows().is_empty());
    client
        .unregister_webhook(id)
        .await
        .expect("'Webhook not found' is as good as removed");
}

#[tokio::test]
async fn unregister_with_an_unexpected_result_is_an_error() {
    let bus = StubBus::start().await;
    bus.script("unregister_webhook", json!({}));
    bus.script(
        "unregister_webhook",
        json!({"success": false, "error": "database is locked"}),
    );
    let client = BusClient::new(&bus.url()).expect("valid url");
    let empty = client.unregister_webhook(7).await.expect_err("{} result");
    assert!(matches!(empty, BusError::Unusable { .. }), "{empty:?}");
    assert!(empty.to_string().contains("unexpected result"), "{empty}");
    let refused = client.unregister_webhook(7).await.expect_err("refused");
    assert!(matches!(refused, BusError::Refused { .. }), "{refused:?}");
    assert!(refused.to_string().contains("database is locked"));
}

#[tokio::test]
async fn unknown_tool_is_a_tool_error() {
    let bus = StubBus::start().await;
    let client = BusClient::new(&bus.url()).expect("valid url");
    let err = client
        .call_tool("nope", json!({}))
        .await
        .expect_err("unknown tool");
    match err {
        BusError::ToolError { message, .. } => assert_eq!(message, "Unknown tool: 'nope'"),
        other => panic!("expected a tool error, got {other:?}"),
    }
}

// ---------------------------------------------------------------- client: typed errors

#[tokio::test]
async fn stopped_bus_is_unreachable_not_unusable() {
    let mut bus = StubBus::start().await;
    bus.stop().await;
    let client = BusClient::new(&bus.url()).expect("valid url");
    let err = client.list_webhooks().await.expect_err("bus is down");
    assert!(err.is_unreachable(), "{err:?}");
    let text = err.to_string();
    assert!(text.contains(&bus.url()), "{text}");
    assert!(text.contains("is agent-event-bus running?"), "{text}");
}

#[tokio::test]
async fn hung_bus_is_unreachable_after_the_call_timeout() {
    let bus = StubBus::start().await;
    bus.set_behaviour(Behaviour::Hang);
    let client =
        BusClient::with_timeout(&bus.url(), Duration::from_millis(300)).expect("valid url");
    let started = Instant::now();
    let err = client.list_webhooks().await.expect_err("no answer");
    assert!(err.is_unreachable(), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn http_error_status_is_its_own_error() {
    let bus = StubBus::start().await;
    bus.set_behaviour(Behaviour::Status(500));
    let client = BusClient::new(&bus.url()).expect("valid url");
    match client.list_webhooks().await {
        Err(BusError::Http { status, .. }) => assert_eq!(status, 500),
        other => panic!("expected an HTTP error, got {other:?}"),
    }
}

#[tokio::test]
async fn replies_without_a_usable_data_line_are_unusable() {
    let bus = StubBus::start().await;
    let client = BusClient::new(&bus.url()).expect("valid url");
    for body in [
        "event: message\r\n\r\n",
        "event: message\r\ndata: {not json\r\n\r\n",
        "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32603,\"message\":\"boom\"}}\r\n\r\n",
    ] {
        bus.set_behaviour(Behaviour::RawBody(body.to_owned()));
        let err = client.list_webhooks().await.expect_err("unusable");
        assert!(
            matches!(err, BusError::Unusable { .. }),
            "{body:?}: {err:?}"
        );
    }
}

#[tokio::test]
async fn lf_only_streams_and_bare_data_fields_are_read() {
    let bus = StubBus::start().await;
    bus.set_behaviour(Behaviour::RawBody(
        "event: message\ndata:{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"structuredContent\":{\"result\":[]}}}\n\n"
            .to_owned(),
    ));
    let client = BusClient::new(&bus.url()).expect("valid url");
    assert_eq!(client.list_webhooks().await.expect("listing"), vec![]);
}

// ---------------------------------------------------------------- keeper

#[tokio::test]
async fn registers_once_the_bus_comes_up() {
    let (logs, _guard) = Logs::capture();
    let mut bus = StubBus::start().await;
    bus.stop().await;
    let keeper = Running::start(&bus.url());
    eventually("a retry warning", || logs.count("retrying in 1s") >= 1).await;
    assert!(!keeper.status.snapshot().registered);
    bus.restart().await;
    let id = keeper.registered_id().await;
    assert_eq!(
        bus.rows_at(HOOK_URL)
            .iter()
            .map(|r| r.webhook_id)
            .collect::<Vec<_>>(),
        vec![id]
    );
    assert!(
        logs.text()
            .contains(&format!("Registered bridge webhook #{id} on {}", bus.url()))
    );
    assert!(logs.text().contains("is agent-event-bus running?"));
    keeper.stop().await;
}

#[tokio::test]
async fn startup_sweeps_active_and_paused_rows_at_our_url_only() {
    let (logs, _guard) = Logs::capture();
    let bus = StubBus::start().await;
    let stale_active = bus.insert_row(HOOK_URL, true);
    let stale_paused = bus.insert_row(HOOK_URL, false);
    let elsewhere = bus.insert_row("http://elsewhere/hook", true);
    let old_port = bus.insert_row("http://127.0.0.1:9000/hook", true);
    let keeper = Running::start(&bus.url());
    let id = keeper.registered_id().await;

    let mut left: Vec<i64> = bus.rows().iter().map(|r| r.webhook_id).collect();
    left.sort_unstable();
    assert_eq!(left, vec![elsewhere, old_port, id]);
    let mut removed: Vec<_> = bus.calls_of("unregister_webhook");
    removed.sort_by_key(std::string::ToString::to_string);
    assert_eq!(
        removed,
        vec![
            json!({"webhook_id": stale_active}),
            json!({"webhook_id": stale_paused})
        ]
    );
    assert_eq!(
        bus.calls_of("list_webhooks")[0],
        json!({"active_only": false})
    );
    assert!(
        logs.text()
            .contains(&format!("Removed stale bridge webhook #{stale_paused}"))
    );
    // The row at the old port is named once, however many listings see it.
    tokio::time::sleep(TEST_KEEP_INTERVAL * 3).await;
    assert_eq!(logs.count("http://127.0.0.1:9000/hook looks like"), 1);
    assert!(bus.rows_at("http://127.0.0.1:9000/hook").len() == 1);
    keeper.stop().await;
}

#[tokio::test]
async fn deleted_row_is_registered_again_within_one_keeper_period() {
    let bus = StubBus::start().await;
    let keeper = Running::start(&bus.url());
    let first = keeper.registered_id().await;
    let deleted_at = Instant::now();
    assert!(bus.delete_row(first));
    eventually("a new row", || {
        keeper.status.snapshot().registered && keeper.status.snapshot().webhook_id != Some(first)
    })
    .await;
    // One period to notice plus the calls themselves, with slack for a loaded machine.
    assert!(
        deleted_at.elapsed() < TEST_KEEP_INTERVAL + Duration::from_millis(500),
        "{:?}",
        deleted_at.elapsed()
    );
    assert_eq!(bus.rows_at(HOOK_URL).len(), 1);
    keeper.stop().await;
}

#[tokio::test]
async fn status_reads_false_until_the_deleted_row_is_back() {
    let bus = StubBus::start().await;
    let keeper = Running::start(&bus.url());
    let first = keeper.registered_id().await;
    let verified = keeper.status.snapshot().last_verified_at;
    // The first re-registration fails, so the gap lasts one backoff step (1 s).
    bus.script("register_webhook", json!({}));
    assert!(bus.delete_row(first));
    eventually("registered=false", || !keeper.status.snapshot().registered).await;
    assert_eq!(keeper.status.snapshot().webhook_id, None);
    let second = keeper.registered_id().await;
    assert_ne!(second, first);
    assert!(keeper.status.snapshot().last_verified_at > verified);
    keeper.stop().await;
}

#[tokio::test]
async fn paused_row_is_replaced_by_an_active_one() {
    let bus = StubBus::start().await;
    let keeper = Running::start(&bus.url());
    let first = keeper.registered_id().await;
    assert!(bus.set_active(first, false));
    eventually("a new active row", || {
        keeper.status.snapshot().registered && keeper.status.snapshot().webhook_id != Some(first)
    })
    .await;
    let rows = bus.rows_at(HOOK_URL);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(rows[0].active);
    keeper.stop().await;
}

#[tokio::test]
async fn status_follows_the_bus_going_down_and_coming_back() {
    let mut bus = StubBus::start().await;
    let keeper = Running::start(&bus.url());
    let id = keeper.registered_id().await;
    bus.stop().await;
    eventually("registered=false while the bus is down", || {
        !keeper.status.snapshot().registered
    })
    .await;
    // The row most likely still exists, so the id is kept for shutdown.
    assert_eq!(keeper.status.snapshot().webhook_id, Some(id));
    bus.restart().await;
    assert_eq!(keeper.registered_id().await, id);
    keeper.stop().await;
}

#[tokio::test]
async fn shutdown_unregisters_our_row() {
    let (logs, _guard) = Logs::capture();
    let bus = StubBus::start().await;
    let keeper = Running::start(&bus.url());
    let id = keeper.registered_id().await;
    let status = Arc::clone(&keeper.status);
    keeper.stop().await;
    assert!(bus.rows_at(HOOK_URL).is_empty());
    assert_eq!(
        bus.calls_of("unregister_webhook"),
        vec![json!({"webhook_id": id})]
    );
    assert_eq!(status.snapshot().webhook_id, None);
    assert!(!status.snapshot().registered);
    assert!(
        logs.text()
            .contains(&format!("Unregistered bridge webhook #{id}"))
    );
}

#[tokio::test]
async fn shutdown_is_bounded_when_the_bus_hangs() {
    let (logs, _guard) = Logs::capture();
    let bus = StubBus::start().await;
    let keeper = Running::start(&bus.url());
    let id = keeper.registered_id().await;
    bus.set_behaviour(Behaviour::Hang);
    let took = keeper.stop().await;
    assert!(
        took <= SHUTDOWN_BUDGET + Duration::from_secs(1),
        "shutdown took {took:?}"
    );
    assert!(
        logs.text()
            .contains(&format!("Could not unregister webhook #{id}"))
    );
}

#[tokio::test]
async fn shutdown_does_not_wait_for_a_hung_start_up_listing() {
    let bus = StubBus::start().await;
    bus.set_behaviour(Behaviour::Hang);
    let keeper = Running::start(&bus.url());
    eventually("the listing to reach the bus", || {
        !bus.requests().is_empty()
    })
    .await;
    let took = keeper.stop().await;
    assert!(took < Duration::from_secs(1), "shutdown took {took:?}");
    assert!(bus.calls().is_empty(), "a hung bus records no tool call");
}

#[tokio::test]
async fn shutdown_while_the_bus_is_down_warns_and_returns() {
    let (logs, _guard) = Logs::capture();
    let mut bus = StubBus::start().await;
    let keeper = Running::start(&bus.url());
    let id = keeper.registered_id().await;
    bus.stop().await;
    let took = keeper.stop().await;
    assert!(took < SHUTDOWN_BUDGET, "{took:?}");
    assert!(logs.text().contains(&format!(
        "Could not unregister webhook #{id} (bus unreachable)"
    )));
}

#[tokio::test]
async fn shutdown_before_start_makes_no_call() {
    let bus = StubBus::start().await;
    let shutdown = CancellationToken::new();
    shutdown.cancel();
    let keeper = Running::start_with(config_for(&bus.url()), shutdown);
    keeper.stop().await;
    assert!(bus.calls().is_empty(), "{:?}", bus.calls());
}

// ---------------------------------------------------------------- supervision files

const PLIST: &str = include_str!("../../deploy/wakebridge.plist");
const UNIT: &str = include_str!("../../deploy/wakebridge.service");

/// A minimal well-formedness check: every element closes in order, comments hold no `--`.
/// Enough to catch a hand-edit slip in a plist; not a general XML parser.
fn check_xml_nesting(xml: &str) -> Result<Vec<String>, String> {
    let mut open: Vec<String> = Vec::new();
    let mut seen = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find('<') {
        rest = &rest[start..];
        if let Some(comment) = rest.strip_prefix("<!--") {
            let end = comment.find("-->").ok_or("unterminated comment")?;
            if comment[..end].contains("--") {
                return Err("`--` inside a comment".to_owned());
            }
            rest = &comment[end + 3..];
            continue;
        }
        let end = rest.find('>').ok_or("unterminated tag")?;
        let tag = &rest[1..end];
        rest = &rest[end + 1..];
        if tag.starts_with('?') || tag.starts_with('!') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            match open.pop() {
                Some(top) if top == name.trim() => {}
                other => return Err(format!("</{name}> closes {other:?}")),
            }
        } else {
            let name = tag
                .split_whitespace()
                .next()
                .unwrap_or("")
                .trim_end_matches('/');
            seen.push(name.to_owned());
            if !tag.ends_with('/') {
                open.push(name.to_owned());
            }
        }
    }
    if open.is_empty() {
        Ok(seen)
    } else {
        Err(format!("unclosed elements {open:?}"))
    }
}

#[test]
fn xml_check_rejects_misnested_plists() {
    assert!(check_xml_nesting("<plist><dict></plist></dict>").is_err());
    assert!(check_xml_nesting("<plist><dict>").is_err());
    assert!(check_xml_nesting("<!-- a -- b --><plist/>").is_err());
    assert!(check_xml_nesting("<plist><true/></plist>").is_ok());
}

#[test]
fn launch_agent_plist_is_well_formed() {
    let elements = check_xml_nesting(PLIST).expect("well-formed plist");
    assert_eq!(elements.first().map(String::as_str), Some("plist"));
}

fn have(program: &str) -> bool {
    std::process::Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn launch_agent_plist_parses_as_a_property_list() {
    if !have("python3") {
        common::skip_or_fail("python3 (plistlib) is not installed", common::GET_PYTHON3);
        return;
    }
    let mut child = std::process::Command::new("python3")
        .args([
            "-c",
            "import json, plistlib, sys; print(json.dumps(plistlib.loads(sys.stdin.buffer.read())))",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn python3");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(PLIST.as_bytes())
        .expect("write plist");
    let output = child.wait_with_output().expect("python3 ran");
    assert!(output.status.success(), "plistlib refused the plist");
    let parsed: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
    // The wrapper script that maps exit 2 to 0 (tests/it/service.rs runs it).
    let script = parsed["ProgramArguments"][2].as_str().unwrap_or_default();
    assert!(
        script.contains(r#"if [ "$status" -eq 2 ]; then exit 0; fi"#),
        "{script}"
    );
    assert_eq!(
        parsed,
        json!({
            "Label": "dev.wakebridge",
            "ProgramArguments": ["/bin/sh", "-c", script, "__HOME__/.cargo/bin/wakebridge", "serve"],
            "RunAtLoad": true,
            "KeepAlive": {"SuccessfulExit": false},
            "ThrottleInterval": 10,
            "ProcessType": "Background",
            "EnvironmentVariables": {
                "PATH": "__HOME__/.cargo/bin:/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin",
                "HOME": "__HOME__",
            },
            "StandardOutPath": "__HOME__/Library/Logs/wakebridge/wakebridge.log",
            "StandardErrorPath": "__HOME__/Library/Logs/wakebridge/wakebridge.err",
        })
    );
}

#[test]
fn systemd_unit_runs_serve_with_restart_on_failure() {
    let lines: Vec<&str> = UNIT.lines().map(str::trim).collect();
    for expected in [
        "ExecStart=%h/.cargo/bin/wakebridge serve",
        "Environment=PATH=%h/.cargo/bin:/opt/homebrew/bin:/home/linuxbrew/.linuxbrew/bin:%h/.linuxbrew/bin:/usr/local/bin:/usr/bin:/bin",
        "RestartPreventExitStatus=2",
        "Restart=on-failure",
        "RestartSec=10",
        "WantedBy=default.target",
    ] {
        assert!(lines.contains(&expected), "missing {expected:?}");
    }
}

#[test]
fn systemd_unit_passes_systemd_analyze_verify() {
    if !have("systemd-analyze") {
        common::skip_or_fail(
            "systemd-analyze is not installed",
            "`apt-get install systemd` (.ci/run installs it)",
        );
        return;
    }
    // verify insists the ExecStart binary exists, so point it at the one cargo just built.
    let dir = common::tempdir();
    let path = dir.path().join("wakebridge.service");
    let unit = UNIT.replace("%h/.cargo/bin/wakebridge", env!("CARGO_BIN_EXE_wakebridge"));
    std::fs::write(&path, unit).expect("write unit");
    let output = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .expect("run systemd-analyze");
    let stderr = String::from_utf8_lossy(&output.stderr);
    // It exits 0 even for unknown keys, so its complaints about our file count as failures.
    let complaints: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("wakebridge.service"))
        .collect();
    assert!(output.status.success(), "{stderr}");
    assert!(complaints.is_empty(), "{complaints:#?}");
}

/// The keeper's configuration for `bus_url`: no secret, the tests' keep interval.
fn config_for(bus_url: &str) -> RegistrationConfig {
    RegistrationConfig {
        what: "bridge webhook",
        bus_url: bus_url.to_owned(),
        hook_url: HOOK_URL.to_owned(),
        channel: wakebridge::bus::SESSION_CHANNEL.to_owned(),
        secret: None,
        keep_interval: TEST_KEEP_INTERVAL,
        listing: std::sync::Arc::default(),
    }
}

/// The daemon's two keepers (the bridge's webhook, the fleet's) share their listing: both rows
/// are kept with about one `list_webhooks` a keep interval, not two, and a row deleted on the
/// bus is still put back.
#[tokio::test]
async fn two_keepers_sharing_a_listing_keep_both_rows_with_one_listing_an_interval() {
    const FLEET_HOOK: &str = "http://127.0.0.1:8082/fleet/hook";
    let bus = StubBus::start().await;
    let listing = Arc::new(registration::SharedListing::default());
    let bridge = Running::start_with(
        RegistrationConfig {
            listing: listing.clone(),
            ..config_for(&bus.url())
        },
        CancellationToken::new(),
    );
    let fleet = Running::start_with(
        RegistrationConfig {
            what: "fleet webhook",
            hook_url: FLEET_HOOK.to_owned(),
            channel: "wakebridge:cmd:box:".to_owned(),
            listing,
            ..config_for(&bus.url())
        },
        CancellationToken::new(),
    );
    let (bridge_id, fleet_id) = (bridge.registered_id().await, fleet.registered_id().await);
    let listed_before = bus.calls_of("list_webhooks").len();
    let intervals = 10;
    tokio::time::sleep(TEST_KEEP_INTERVAL * intervals).await;
    let listed = bus.calls_of("list_webhooks").len() - listed_before;
    // Two keepers on their own list twice an interval (20 here); sharing, once, and more only
    // where a late wake-up puts one past the other's listing.
    eprintln!("{listed} listings in {intervals} keep intervals");
    assert!(
        listed <= intervals as usize * 3 / 2,
        "{listed} listings in {intervals} keep intervals"
    );
    assert_eq!(bus.rows_at(HOOK_URL)[0].webhook_id, bridge_id);
    assert!(bus.delete_row(fleet_id));
    eventually("the fleet row put back", || {
        bus.rows_at(FLEET_HOOK).iter().any(|row| row.active)
    })
    .await;
    assert_eq!(
        bus.rows_at(HOOK_URL).len(),
        1,
        "the bridge's row left alone"
    );
    bridge.stop().await;
    fleet.stop().await;
}
