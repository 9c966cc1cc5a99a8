//! The fleet against the real agent-event-bus: two daemons in process, each its own machine
//! with its own dirs, sharing one bus and one fleet key. Each sees the other's sessions through
//! signed statuses; a status under another key or for another machine is refused and counted,
//! a bare heartbeat shows nothing;
//! a machine that stops is shown offline with its last status; with the bus down each daemon
//! shows itself alone and says why, and the fleet comes back with the bus. One machine's
//! commands run on another once, through its webhook or its catch-up; forged ones never.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use serde_json::{Value, json};
use wakebridge::bus::BusClient;

use crate::common;
use crate::common::harness::{Daemon, TestServer, binary, fed, free_port};
use crate::common::real_bus::RealBus;

/// A change on one machine reaches the other's view within its 15 s gap and a view's read.
const SEEN_WITHIN: Duration = Duration::from_secs(40);

struct Machine {
    server: TestServer,
}

async fn machine(name: &str, bus: &RealBus, key_file: &std::path::Path) -> Machine {
    machine_with(name, bus, key_file, &[]).await
}

async fn machine_with(
    name: &str,
    bus: &RealBus,
    key_file: &std::path::Path,
    extra: &[(&str, &str)],
) -> Machine {
    let env = fleet_env(name, bus, key_file, extra);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let flags = wakebridge::config::Flags {
        port: Some(free_port().to_string()),
        ..Default::default()
    };
    let server = TestServer::start_with(&env, flags).await;
    Machine { server }
}

/// Machine `name`'s settings: the bus, the key, a quick session loop, and `extra`.
fn fleet_env<'a>(
    name: &str,
    bus: &RealBus,
    key_file: &std::path::Path,
    extra: &[(&'a str, &str)],
) -> Vec<(&'a str, String)> {
    let mut env = vec![
        ("AGENT_EVENT_BUS_URL", bus.url()),
        ("WAKEBRIDGE_FLEET__MACHINE", name.to_owned()),
        ("WAKEBRIDGE_FLEET__KEY_FILE", key_file.display().to_string()),
        ("WAKEBRIDGE_NUDGER__POLL_INTERVAL", "500ms".to_owned()),
    ];
    env.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    env
}

/// Machine `name` as a daemon process of its own under `root`: its counters its own, and it
/// can be stopped dead.
async fn machine_process(
    name: &str,
    bus: &RealBus,
    key_file: &std::path::Path,
    extra: &[(&str, &str)],
    root: &std::path::Path,
) -> Daemon {
    let env = fleet_env(name, bus, key_file, extra);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let daemon = Daemon::spawn(root, &env, None);
    daemon.wait_ready(&reqwest::Client::new()).await;
    daemon
}

/// A machine whose webhooks are registered on the bus (the bridge's and the fleet's), kept
/// and caught up every second.
async fn registered_machine(name: &str, bus: &RealBus, key_file: &std::path::Path) -> Machine {
    let extra = [
        ("WAKEBRIDGE_REGISTRATION__ENABLED", "true"),
        ("WAKEBRIDGE_REGISTRATION__KEEP_INTERVAL", "1s"),
    ];
    machine_with(name, bus, key_file, &extra).await
}

/// A session the machine's own hook made known, working in `/work/<project>`.
fn hook_session(server: &TestServer, sid: &str, project: &str) {
    let mut cmd = binary(server.root.path(), &[]);
    cmd.arg("hook");
    let payload = json!({"session_id": sid, "hook_event_name": "SessionStart",
                         "source": "startup", "cwd": format!("/work/{project}")});
    let out = fed(cmd, &payload.to_string());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn key_file(dir: &std::path::Path, key: &str) -> std::path::PathBuf {
    let path = dir.join(format!("fleet-{}.key", key.len()));
    std::fs::write(&path, format!("{key}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

fn machine_in<'a>(fleet: &'a Value, name: &str) -> Option<&'a Value> {
    fleet["machines"]
        .as_array()?
        .iter()
        .find(|m| m["name"] == name)
}

fn session_in<'a>(fleet: &'a Value, machine: &str, sid: &str) -> Option<&'a Value> {
    machine_in(fleet, machine)?["status"]["sessions"]
        .as_array()?
        .iter()
        .find(|s| s["id"] == sid)
}

async fn fleet_until(server: &TestServer, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    common::eventually_ok(what, SEEN_WITHIN, async || {
        let fleet = server.get_json("/fleet").await;
        if done(&fleet) {
            Ok(fleet)
        } else {
            Err(fleet.to_string())
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_machines_see_each_other_through_the_real_bus() {
    let Some(mut bus) = RealBus::start_or_skip().await else {
        return;
    };
    let keys = common::tempdir();
    let key = key_file(keys.path(), "a fleet key shared by both");
    let alpha = machine("alpha", &bus, &key).await;
    let beta = machine("beta", &bus, &key).await;
    hook_session(&beta.server, "beta-session-1", "parser");

    // Alpha sees beta's session, with its project and state; never a path.
    let fleet = fleet_until(&alpha.server, "beta's session in alpha's view", |f| {
        session_in(f, "beta", "beta-session-1").is_some()
    })
    .await;
    assert_eq!(fleet["machines"][0]["name"], "alpha", "{fleet}");
    assert_eq!(fleet["machines"][0]["this"], true, "{fleet}");
    let beta_seen = machine_in(&fleet, "beta").unwrap();
    assert_eq!(beta_seen["online"], true, "{fleet}");
    let session = session_in(&fleet, "beta", "beta-session-1").unwrap();
    assert_eq!(session["project"], "parser", "{fleet}");
    assert!(
        !fleet.to_string().contains("/work/"),
        "a path crossed the bus: {fleet}"
    );

    // A pause on beta shows in alpha's view.
    let (code, body) = beta
        .server
        .post_json("/pause", json!({"session_ids": ["beta-session-1"]}))
        .await;
    assert_eq!(code, 200, "{body}");
    fleet_until(&alpha.server, "the pause in alpha's view", |f| {
        // No pane (the spool backend): `no-pane` outranks `paused` as its state.
        session_in(f, "beta", "beta-session-1").is_some_and(|s| s["paused"].is_object())
    })
    .await;

    // Statuses signed with another key, or naming another machine than their channel, are
    // refused and counted; none shows.
    let client = BusClient::new(&bus.url()).unwrap();
    let forged = |machine: &str, channel_machine: &str, key: &str| {
        let body = json!({"machine": machine, "version": "9", "at": "2026-12-06T00:00:00Z",
                          "sessions": [], "budgets": []});
        let key = wakebridge::wire::signature::Secret::new(key);
        let payload = wakebridge::fleet::seal::seal("wakebridge_status", &body, &key);
        json!({"event_type": "wakebridge_status", "payload": payload,
               "channel": format!("wakebridge:status:{channel_machine}")})
    };
    for args in [
        forged("gamma", "gamma", "not the fleet key"),
        forged("alpha", "delta", "a fleet key shared by both"),
    ] {
        client.call_tool("publish_event", args).await.unwrap();
    }
    // A heartbeat alone, which anyone can give, shows no machine.
    let phantom = json!({"name": "wakebridge:phantom", "machine": "phantom",
                         "client_id": "wakebridge:phantom"});
    client.call_tool("register_session", phantom).await.unwrap();
    let fleet = fleet_until(&alpha.server, "forged statuses counted", |f| {
        f["refused"].as_u64() >= Some(2)
    })
    .await;
    assert!(machine_in(&fleet, "gamma").is_none(), "{fleet}");
    assert!(machine_in(&fleet, "delta").is_none(), "{fleet}");
    assert!(machine_in(&fleet, "phantom").is_none(), "{fleet}");

    // Beta stops: offline at once (it left the bus's list), its last status still shown.
    let beta_root = beta.server.stop().await;
    let fleet = fleet_until(&alpha.server, "beta offline", |f| {
        machine_in(f, "beta").is_some_and(|m| m["online"] == false)
    })
    .await;
    assert!(
        session_in(&fleet, "beta", "beta-session-1").is_some(),
        "{fleet}"
    );
    // A command to it is refused at once, nothing sent.
    let asked = std::time::Instant::now();
    let body = json!({"machine": "beta", "verb": "pause", "args": {"all": true}});
    let (code, body) = alpha.server.post_json("/fleet/send", body).await;
    assert_eq!(code, 409, "{body}");
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.contains("offline")),
        "{body}"
    );
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "{:?}",
        asked.elapsed()
    );
    drop(beta_root);

    // The bus down: alpha shows itself alone and says why; back with the bus.
    bus.stop().await;
    // Its own work goes on; a command for another machine is refused at once, not queued.
    let (code, body) = alpha
        .server
        .post_json("/pause", json!({"session_ids": ["alpha-local"]}))
        .await;
    assert_eq!(code, 200, "{body}");
    let body = json!({"machine": "beta", "verb": "pause", "args": {"all": true}});
    let (code, body) = alpha.server.post_json("/fleet/send", body).await;
    assert_eq!(code, 503, "{body}");
    let fleet = alpha.server.get_json("/fleet").await;
    assert_eq!(
        fleet["machines"].as_array().map(Vec::len),
        Some(1),
        "{fleet}"
    );
    assert!(
        fleet["problem"]
            .as_str()
            .is_some_and(|p| p.contains("bus did not answer")),
        "{fleet}"
    );
    bus.restart().await;
    fleet_until(&alpha.server, "beta back in view with the bus", |f| {
        machine_in(f, "beta").is_some() && f["problem"].is_null()
    })
    .await;
    alpha.server.stop().await;
}

/// Without a key there is no fleet: `/fleet` shows this machine and says how to join one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_key_the_fleet_is_this_machine_and_says_how_to_join() {
    let server = TestServer::start(&[]).await;
    let fleet = server.get_json("/fleet").await;
    assert_eq!(
        fleet["machines"].as_array().map(Vec::len),
        Some(1),
        "{fleet}"
    );
    assert_eq!(fleet["machines"][0]["this"], true, "{fleet}");
    assert!(
        fleet["problem"]
            .as_str()
            .is_some_and(|p| p.contains("[fleet] key_file")),
        "{fleet}"
    );
    server.stop().await;
}

/// Two daemons that claim one machine name each say so in `/fleet` once it reads a status the
/// other made since it started, and neither shows the other as a machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_claiming_one_name_both_say_so() {
    let Some(bus) = RealBus::start_or_skip().await else {
        return;
    };
    let keys = common::tempdir();
    let key = key_file(keys.path(), "one key for the twins");
    let first = machine("twin", &bus, &key).await;
    let second = machine("twin", &bus, &key).await;
    // Each learns of the other from a status the other made after it started: a change on
    // each (at rest it would be the other's 10-minute status).
    hook_session(&first.server, "first-twin-session", "one");
    hook_session(&second.server, "second-twin-session", "two");
    for daemon in [&first, &second] {
        let fleet = fleet_until(&daemon.server, "the other twin noticed", |f| {
            f["problem"]
                .as_str()
                .is_some_and(|p| p.contains("another wakebridge publishes as twin"))
        })
        .await;
        assert_eq!(
            fleet["machines"].as_array().map(Vec::len),
            Some(1),
            "{fleet}"
        );
    }
    first.server.stop().await;
    second.server.stop().await;
}

/// A command as a sender makes it, `issued` seconds from now and good for `lifetime` seconds.
fn command(to: &str, verb: &str, args: Value, issued: i64, lifetime: i64) -> Value {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let at = |s: i64| (jiff::Timestamp::now() + jiff::SignedDuration::from_secs(s)).to_string();
    json!({"id": format!("test-command-{n}-{}", std::process::id()), "from": "alpha", "to": to,
           "verb": verb, "args": args, "issued_at": at(issued), "expires_at": at(issued + lifetime)})
}

fn sealed(command: &Value, key: &str) -> String {
    let key = wakebridge::wire::signature::Secret::new(key);
    wakebridge::fleet::seal::seal("wakebridge_command", command, &key)
}

async fn publish(client: &BusClient, channel: &str, payload: &str) {
    let args = json!({"event_type": "wakebridge_command", "payload": payload,
                      "session_id": "someone", "channel": channel, "signal_level": "info"});
    client.call_tool("publish_event", args).await.unwrap();
}

/// `wakebridge_fleet_refused_total{why}` as `daemon` counts it.
async fn refused(http: &reqwest::Client, daemon: &Daemon, why: &str) -> u64 {
    let url = format!("http://{}/metrics", daemon.addr);
    let metrics = http.get(&url).send().await.unwrap().text().await.unwrap();
    let series = format!("wakebridge_fleet_refused_total{{why=\"{why}\"}} ");
    (metrics.lines())
        .find_map(|l| l.strip_prefix(series.as_str()))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{metrics}"))
}

fn paused_in(sessions: &Value, sid: &str) -> bool {
    (sessions["sessions"].as_array().into_iter().flatten())
        .any(|s| s["session_id"] == sid && s["pause"].is_object())
}

/// The answers on the bus to one command: how many times it ran.
async fn answers_to(client: &BusClient, from: &str, id: &str) -> usize {
    let args = json!({"channel": format!("wakebridge:result:{from}:"), "correlation_id": id,
                      "event_types": ["wakebridge_result"], "limit": 50});
    let found = client.call_tool("get_events", args).await.unwrap();
    found["events"].as_array().map_or(0, Vec::len)
}

/// Alpha pauses, unpauses and wakes beta's session through the bus, by the route and by the
/// CLI; rewind is refused until beta accepts it; a machine the fleet does not have is named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_machine_pauses_unpauses_and_wakes_another_s_session() {
    // A UUID, as Claude Code's are: the CLI completes a prefix of one.
    const SID: &str = "5e1f0c3a-7b2d-4e8f-9a1c-3d5e7f9b1c2d";
    let Some(bus) = RealBus::start_or_skip().await else {
        return;
    };
    let keys = common::tempdir();
    let key = key_file(keys.path(), "the key for commands");
    let alpha = registered_machine("alpha", &bus, &key).await;
    let beta = registered_machine("beta", &bus, &key).await;
    hook_session(&beta.server, SID, "parser");
    fleet_until(&alpha.server, "beta's session in alpha's view", |f| {
        session_in(f, "beta", SID).is_some()
    })
    .await;
    // The fleet webhook is on the bus, beside the bridge's.
    let client = BusClient::new(&bus.url()).unwrap();
    let rows = client.call_tool("list_webhooks", json!({})).await.unwrap();
    let fleet_hook = format!("http://{}/fleet/hook", beta.server.addr);
    assert!(rows.to_string().contains(&fleet_hook), "{rows}");

    let send = |verb: &str, args: Value| {
        let body = json!({"machine": "beta", "verb": verb, "args": args});
        alpha.server.post_json("/fleet/send", body)
    };
    let (code, body) = send("pause", json!({"session_ids": [SID]})).await;
    assert_eq!((code, &body["status"]), (200, &json!(200)), "{body}");
    assert_eq!(body["answer"]["status"], "paused", "{body}");
    assert!(paused_in(&beta.server.get_json("/sessions").await, SID));

    let (code, body) = send("unpause", json!({"session_ids": [SID]})).await;
    assert_eq!((code, &body["status"]), (200, &json!(200)), "{body}");
    assert!(!paused_in(&beta.server.get_json("/sessions").await, SID));

    let (code, body) = send("wake", json!({"session_id": SID})).await;
    assert_eq!((code, &body["status"]), (200, &json!(200)), "{body}");
    assert_eq!(body["answer"]["session_id"], SID, "{body}");

    // Rewind is not among beta's accepted verbs: answered 403, counted, nothing recorded.
    let (code, body) = send("rewind", json!({"session_id": SID})).await;
    assert_eq!((code, &body["status"]), (200, &json!(403)), "{body}");
    assert!(
        body["answer"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("[fleet] accept")),
        "{body}"
    );

    // The local route's rules: a text is no field of /pause's body.
    let args = json!({"session_ids": [SID], "text": "rm -rf ~"});
    let (code, body) = send("pause", args).await;
    assert_eq!((code, &body["status"]), (200, &json!(400)), "{body}");
    assert!(!paused_in(&beta.server.get_json("/sessions").await, SID));

    // A machine the fleet does not have, named with the ones it has.
    let body = json!({"machine": "nosuch", "verb": "pause", "args": {"all": true}});
    let (code, body) = alpha.server.post_json("/fleet/send", body).await;
    assert_eq!(code, 404, "{body}");
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.contains("alpha, beta")),
        "{body}"
    );

    // By the CLI, with a prefix of the id as beta's view shows it.
    let mut cmd = binary(alpha.server.root.path(), &[]);
    cmd.args(["pause", "5e1f0c3a", "--machine", "beta", "--url"])
        .arg(alpha.server.url(""));
    let out = fed(cmd, "");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.trim(), format!("{SID}: paused"));
    assert!(paused_in(&beta.server.get_json("/sessions").await, SID));

    // `doctor` on alpha: its key, on the bus, its webhook there, its status published.
    let key_path = key.display().to_string();
    let fleet_env = [
        ("WAKEBRIDGE_FLEET__MACHINE", "alpha"),
        ("WAKEBRIDGE_FLEET__KEY_FILE", key_path.as_str()),
    ];
    let mut cmd = binary(alpha.server.root.path(), &fleet_env);
    cmd.args(["doctor", "--url"]).arg(alpha.server.url(""));
    let out = fed(cmd, "");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains(" fleet "))
        .unwrap_or_default();
    assert!(line.starts_with("ok"), "{stdout}");
    assert!(
        line.contains("machine alpha, its key only yours; on the bus, status published"),
        "{stdout}"
    );
    alpha.server.stop().await;
    beta.server.stop().await;
}

/// The page of one machine lists another's session and acts on it through the fleet, saying
/// that machine's own answer (a verb it does not accept, with why).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_acts_on_another_machine_s_session_through_the_fleet() {
    const SID: &str = "7a1f0c3a-7b2d-4e8f-9a1c-3d5e7f9b1c2d";
    let Some(chromium) = crate::common::browser::chromium() else {
        common::skip_or_fail(
            "chromium is not on PATH",
            crate::common::browser::GET_CHROMIUM,
        );
        return;
    };
    let Some(bus) = RealBus::start_or_skip().await else {
        return;
    };
    let keys = common::tempdir();
    let key = key_file(keys.path(), "the key for the page");
    let alpha = registered_machine("alpha", &bus, &key).await;
    let beta = registered_machine("beta", &bus, &key).await;
    hook_session(&beta.server, SID, "parser");
    fleet_until(&alpha.server, "beta's session in alpha's view", |f| {
        session_in(f, "beta", SID).is_some()
    })
    .await;

    let mut page = crate::common::browser::Browser::open(&chromium, &alpha.server.url("/")).await;
    let row = format!(r#"document.querySelector('tr[data-session="{SID}"]')"#);
    page.until(
        &format!("{row}?.cells[0].textContent === 'beta'"),
        SEEN_WITHIN,
    )
    .await;
    let click =
        |verb: &str| format!(r#"{row}.querySelector('button[data-verb="{verb}"]').click()"#);
    let said = "document.getElementById('said').textContent";
    page.eval(&click("pause")).await;
    page.until(
        &format!("{said} === 'pause {}: paused'", &SID[..8]),
        SEEN_WITHIN,
    )
    .await;
    assert!(paused_in(&beta.server.get_json("/sessions").await, SID));
    page.eval(&click("rewind")).await;
    page.until(&format!("{said}.includes('[fleet] accept')"), SEEN_WITHIN)
        .await;
}
/// Forged commands on beta's channel: unsigned, another key, for another machine, on the
/// channel without its colon, expired, replayed, a verb beta does not accept, carrying text.
/// Each is refused and counted (the one beta's webhook never sees, not counted), and none
/// pauses anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_commands_are_refused_counted_and_run_nothing() {
    let Some(bus) = RealBus::start_or_skip().await else {
        return;
    };
    let keys = common::tempdir();
    let fleet_key = "the key for forgeries";
    let key = key_file(keys.path(), fleet_key);
    // A daemon of its own: the counters are the process's, and tests run side by side.
    let root = common::tempdir();
    let registered = [
        ("WAKEBRIDGE_REGISTRATION__ENABLED", "true"),
        ("WAKEBRIDGE_REGISTRATION__KEEP_INTERVAL", "1s"),
    ];
    let beta = machine_process("beta", &bus, &key, &registered, root.path()).await;
    let http = reqwest::Client::new();
    let client = BusClient::new(&bus.url()).unwrap();
    let fleet_hook = format!("http://{}/fleet/hook", beta.addr);
    // Its webhook on the bus, and its start behind it (the first status goes out after the
    // start's read of what came before, which counts nothing).
    common::eventually_ok("beta's fleet webhook registered", SEEN_WITHIN, async || {
        let rows = client.call_tool("list_webhooks", json!({})).await.unwrap();
        let health = http
            .get(format!("http://{}/health", beta.addr))
            .send()
            .await;
        let health: Value = health.unwrap().json().await.unwrap();
        let started = health["fleet"]["published_at"].is_string();
        let there = rows.to_string().contains(&fleet_hook);
        if there && started {
            Ok(())
        } else {
            Err(format!("{rows} {health}"))
        }
    })
    .await;
    let target = json!({"session_ids": ["forged-target"]});
    let channel = "wakebridge:cmd:beta:";
    let good = command("beta", "pause", target.clone(), 0, 30);
    let unsigned = serde_json::to_string(&good).unwrap();
    publish(&client, channel, &format!("sha256=00\n{unsigned}")).await;
    publish(
        &client,
        channel,
        &sealed(
            &command("beta", "pause", target.clone(), 0, 30),
            "another key",
        ),
    )
    .await;
    publish(
        &client,
        channel,
        &sealed(&command("gamma", "pause", target.clone(), 0, 30), fleet_key),
    )
    .await;
    publish(
        &client,
        "wakebridge:cmd:beta",
        &sealed(&command("beta", "pause", target.clone(), 0, 30), fleet_key),
    )
    .await;
    publish(
        &client,
        channel,
        &sealed(
            &command("beta", "pause", target.clone(), -300, 30),
            fleet_key,
        ),
    )
    .await;
    publish(
        &client,
        channel,
        &sealed(
            &command("beta", "pause", target.clone(), 0, 86_400),
            fleet_key,
        ),
    )
    .await;
    publish(
        &client,
        channel,
        &sealed(
            &command(
                "beta",
                "rewind",
                json!({"session_id": "forged-target"}),
                0,
                30,
            ),
            fleet_key,
        ),
    )
    .await;
    let mut texted = command("beta", "pause", target.clone(), 0, 30);
    texted["text"] = json!("rm -rf ~");
    publish(&client, channel, &sealed(&texted, fleet_key)).await;
    // A good command, then the very same payload again: whichever comes second is a replay.
    let replayed = sealed(
        &command("beta", "unpause", target.clone(), 0, 30),
        fleet_key,
    );
    publish(&client, channel, &replayed).await;
    publish(&client, channel, &replayed).await;
    let expected = [
        ("signature", 2),
        ("not-addressed", 1),
        ("expired", 2),
        ("not-accepted", 1),
        ("malformed", 1),
        ("replayed", 1),
    ];
    common::eventually_ok("every forgery counted", SEEN_WITHIN, async || {
        let mut counted = Vec::new();
        for (why, _) in expected {
            counted.push((why, refused(&http, &beta, why).await));
        }
        if counted == expected {
            Ok(())
        } else {
            Err(format!("{counted:?}"))
        }
    })
    .await;
    // None ran: the target was never paused (an unpause of it finds no pause of its own).
    let unpause = json!({"session_ids": ["forged-target"]});
    let url = format!("http://{}/unpause", beta.addr);
    let answer = http.post(&url).json(&unpause).send().await.unwrap();
    assert_eq!(answer.status(), 200);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["not_paused"], json!(["forged-target"]), "{body}");
    assert_eq!(refused(&http, &beta, "rule").await, 0);
}

/// A machine whose fleet webhook is gone (never registered here; deleted, the keeper restores
/// it) still runs a command sent meanwhile, once, when it catches up on its channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_the_webhook_missed_runs_once_through_the_catch_up() {
    let Some(bus) = RealBus::start_or_skip().await else {
        return;
    };
    let keys = common::tempdir();
    let key = key_file(keys.path(), "the key for catching up");
    let alpha = machine("alpha", &bus, &key).await;
    // No webhook at all: only the catch-up, every second, reads gamma's commands. Gamma takes
    // rewinds from the fleet.
    let gamma = machine_with(
        "gamma",
        &bus,
        &key,
        &[
            ("WAKEBRIDGE_REGISTRATION__KEEP_INTERVAL", "1s"),
            ("WAKEBRIDGE_FLEET__ACCEPT", "wake, pause, unpause, rewind"),
        ],
    )
    .await;
    hook_session(&gamma.server, "gamma-session-1", "lexer");
    fleet_until(&alpha.server, "gamma in alpha's view", |f| {
        session_in(f, "gamma", "gamma-session-1").is_some()
    })
    .await;
    let body = json!({"machine": "gamma", "verb": "pause",
                      "args": {"session_ids": ["gamma-session-1"]}});
    let (code, body) = alpha.server.post_json("/fleet/send", body).await;
    assert_eq!((code, &body["status"]), (200, &json!(200)), "{body}");
    assert!(paused_in(
        &gamma.server.get_json("/sessions").await,
        "gamma-session-1"
    ));

    // Once: a few catch-ups later, still one answer to each command on the bus.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let client = BusClient::new(&bus.url()).unwrap();
    let args = json!({"channel": "wakebridge:cmd:gamma:", "event_types": ["wakebridge_command"],
                      "limit": 10});
    let sent = client.call_tool("get_events", args).await.unwrap();
    let sent = sent["events"].as_array().cloned().unwrap_or_default();
    assert_eq!(sent.len(), 1, "{sent:?}");
    let payload = sent[0]["payload"].as_str().unwrap();
    let id = serde_json::from_str::<Value>(payload.split_once('\n').unwrap().1).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(answers_to(&client, "alpha", &id).await, 1);

    // A rewind, accepted here, meets the rewind route's own rules (this session has no pane).
    let body = json!({"machine": "gamma", "verb": "rewind",
                      "args": {"session_id": "gamma-session-1"}});
    let (code, body) = alpha.server.post_json("/fleet/send", body).await;
    assert_eq!(code, 200, "{body}");
    assert!(matches!(body["status"].as_u64(), Some(400 | 409)), "{body}");
    let error = body["answer"]["error"].as_str().unwrap_or_default();
    assert!(!error.contains("[fleet] accept"), "{body}");
    alpha.server.stop().await;
    gamma.server.stop().await;
}

/// The fleet webhook deleted on the bus comes back with its keeper, and commands reach the
/// machine again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_fleet_webhook_is_restored_by_its_keeper() {
    let Some(bus) = RealBus::start_or_skip().await else {
        return;
    };
    let keys = common::tempdir();
    let key = key_file(keys.path(), "the key for keeping");
    let beta = registered_machine("beta", &bus, &key).await;
    let client = BusClient::new(&bus.url()).unwrap();
    let fleet_hook = format!("http://{}/fleet/hook", beta.server.addr);
    let row = async || {
        let rows = client.call_tool("list_webhooks", json!({})).await.unwrap();
        let rows = rows.as_array().cloned().unwrap_or_default();
        rows.into_iter()
            .find(|r| r["url"] == fleet_hook.as_str())
            .and_then(|r| r["webhook_id"].as_i64())
    };
    let first = common::eventually_ok("the fleet webhook registered", SEEN_WITHIN, async || {
        row().await.ok_or("none")
    })
    .await;
    client
        .call_tool("unregister_webhook", json!({"webhook_id": first}))
        .await
        .unwrap();
    let second = common::eventually_ok("the fleet webhook restored", SEEN_WITHIN, async || {
        row().await.filter(|id| *id != first).ok_or("not yet")
    })
    .await;
    assert_ne!(first, second);
    beta.server.stop().await;
}

/// The statuses `machine` has on the bus.
async fn statuses_of(client: &BusClient, machine: &str) -> usize {
    let args = json!({"channel": format!("wakebridge:status:{machine}"),
                      "event_types": ["wakebridge_status"], "limit": 100});
    let found = client.call_tool("get_events", args).await.unwrap();
    found["events"].as_array().map_or(0, Vec::len)
}

/// The bus down for a while and back on its database, then back on a fresh one: each time the
/// machines publish their status again and commands run again, with nothing done by hand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_comes_back_with_a_bus_restarted_on_its_database_or_a_fresh_one() {
    let Some(mut bus) = RealBus::start_or_skip().await else {
        return;
    };
    let keys = common::tempdir();
    let key = key_file(keys.path(), "the key for restarts");
    let alpha = registered_machine("alpha", &bus, &key).await;
    let beta = registered_machine("beta", &bus, &key).await;
    hook_session(&beta.server, "beta-session-1", "parser");
    fleet_until(&alpha.server, "beta's session in alpha's view", |f| {
        session_in(f, "beta", "beta-session-1").is_some()
    })
    .await;
    let client = BusClient::new(&bus.url()).unwrap();
    let pause_on_beta = async |what: &str| {
        common::eventually_ok(what, SEEN_WITHIN, async || {
            let body = json!({"machine": "beta", "verb": "pause", "args": {"all": true}});
            let (code, body) = alpha.server.post_json("/fleet/send", body).await;
            if code == 200 && body["status"] == 200 {
                Ok(())
            } else {
                Err(format!("{code} {body}"))
            }
        })
        .await;
    };

    // Down long enough for a heartbeat to fail, then back on its database.
    let before = statuses_of(&client, "alpha").await;
    bus.stop().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    bus.restart().await;
    common::eventually_ok("alpha's status published again", SEEN_WITHIN, async || {
        let now = statuses_of(&client, "alpha").await;
        if now > before { Ok(()) } else { Err(now) }
    })
    .await;
    pause_on_beta("a command after the restart").await;

    // A fresh database: the machines register again, find the bus did not know them, publish
    // their status again; the keepers put the fleet webhooks back.
    bus.restart_fresh().await;
    for machine in ["alpha", "beta"] {
        common::eventually_ok("a status on the fresh bus", SEEN_WITHIN, async || {
            let now = statuses_of(&client, machine).await;
            if now > 0 { Ok(()) } else { Err(machine) }
        })
        .await;
    }
    pause_on_beta("a command on the fresh bus").await;
    alpha.server.stop().await;
    beta.server.stop().await;
}

/// A machine stopped dead (SIGSTOP: no heartbeat, no goodbye) is shown offline within 100 s,
/// with its last status, and online again soon after SIGCONT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_stopped_dead_goes_offline_and_comes_back() {
    let Some(bus) = RealBus::start_or_skip().await else {
        return;
    };
    let keys = common::tempdir();
    let key = key_file(keys.path(), "the key for stopping");
    let alpha = machine("alpha", &bus, &key).await;
    let root = common::tempdir();
    let beta = machine_process("beta", &bus, &key, &[], root.path()).await;
    let online =
        |want: bool| move |f: &Value| machine_in(f, "beta").is_some_and(|m| m["online"] == want);
    fleet_until(&alpha.server, "beta online", online(true)).await;
    let pid = libc::pid_t::try_from(beta.child.0.id()).unwrap();
    // SAFETY: kill(2) on a child this test started and has not reaped.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let stopped = std::time::Instant::now();
    let fleet = common::eventually_ok("beta offline", Duration::from_secs(100), async || {
        let fleet = alpha.server.get_json("/fleet").await;
        if online(false)(&fleet) {
            Ok(fleet)
        } else {
            Err(fleet.to_string())
        }
    })
    .await;
    eprintln!("beta shown offline {:.0?} after SIGSTOP", stopped.elapsed());
    assert!(
        machine_in(&fleet, "beta").unwrap()["status"].is_object(),
        "{fleet}"
    );
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    fleet_until(&alpha.server, "beta online again", online(true)).await;
    alpha.server.stop().await;
}
