//! The fleet against the real agent-event-bus: two daemons in process, each its own machine
//! with its own dirs, sharing one bus and one fleet key. Each sees the other's sessions through
//! signed statuses; a status under another key or for another machine is refused and counted,
//! a bare heartbeat shows nothing;
//! a machine that stops is shown offline with its last status; with the bus down each daemon
//! shows itself alone and says why, and the fleet comes back with the bus.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use serde_json::{Value, json};
use wakebridge::bus::BusClient;

use crate::common;
use crate::common::harness::{TestServer, binary, fed};
use crate::common::real_bus::RealBus;

/// A change on one machine reaches the other's view within its 15 s gap and a view's read.
const SEEN_WITHIN: Duration = Duration::from_secs(40);

struct Machine {
    server: TestServer,
}

async fn machine(name: &str, bus: &RealBus, key_file: &std::path::Path) -> Machine {
    let key = key_file.display().to_string();
    let server = TestServer::start(&[
        ("AGENT_EVENT_BUS_URL", bus.url().as_str()),
        ("WAKEBRIDGE_FLEET__MACHINE", name),
        ("WAKEBRIDGE_FLEET__KEY_FILE", key.as_str()),
        ("WAKEBRIDGE_NUDGER__POLL_INTERVAL", "500ms"),
    ])
    .await;
    Machine { server }
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
                          "sessions": [], "budgets": []})
        .to_string();
        let signature = wakebridge::wire::signature::Secret::new(key).sign(body.as_bytes());
        json!({"event_type": "wakebridge_status", "payload": format!("{signature}\n{body}"),
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
    drop(beta_root);

    // The bus down: alpha shows itself alone and says why; back with the bus.
    bus.stop().await;
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
