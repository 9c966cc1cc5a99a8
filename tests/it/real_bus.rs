//! The crate's bus client ([`BusClient::call_tool`]) against the REAL agent-event-bus
//! (tests/it/common/real_bus.rs): sessions, events and their reply shapes as the bus itself
//! answers them, and its database surviving a restart. Each test has a bus and database of its
//! own; each skips with a note when no bus is installed, and fails instead in CI, where `.ci/run`
//! installs the vendored one.

use serde_json::{Value, json};
use wakebridge::bus::BusClient;

use crate::common::real_bus::RealBus;

/// Not a number: the bus takes a numeric client id on its own machine for a pid, and drops the
/// session from `list_sessions` once no such process runs.
const CLIENT_ID: &str = "wb-real-bus-client-1";
const MACHINE: &str = "wb-test-machine";

fn client(bus: &RealBus) -> BusClient {
    BusClient::new(&bus.url()).expect("a client for the bus URL")
}

async fn register(bus: &BusClient, name: &str) -> Value {
    let args = json!({"name": name, "machine": MACHINE, "client_id": CLIENT_ID, "cwd": "/work/wb"});
    let registered = bus.call_tool("register_session", args).await;
    registered.expect("register_session")
}

/// `publish_event` on `channel`; returns the new event's id.
async fn publish(bus: &BusClient, event_type: &str, payload: &str, channel: &str) -> i64 {
    let args = json!({"event_type": event_type, "payload": payload, "channel": channel});
    let published = bus.call_tool("publish_event", args).await.expect("publish");
    assert_eq!(published["payload"], payload, "{published}");
    assert_eq!(published["channel"], channel, "{published}");
    published["event_id"]
        .as_i64()
        .unwrap_or_else(|| panic!("no event_id in {published}"))
}

/// The events `get_events` returns for `args`.
async fn events(bus: &BusClient, args: Value) -> Vec<Value> {
    let got = bus.call_tool("get_events", args).await.expect("get_events");
    match &got["events"] {
        Value::Array(events) => events.clone(),
        _ => panic!("no events list in {got}"),
    }
}

#[tokio::test]
async fn real_bus_register_session_keeps_the_client_id_and_lists_it_with_its_machine() {
    let Some(bus) = RealBus::start_or_skip().await else {
        return;
    };
    let client = client(&bus);

    let first = register(&client, "wb-test").await;
    assert_eq!(first["session_id"], CLIENT_ID, "{first}");
    assert_eq!(first["machine"], MACHINE, "{first}");
    assert_eq!(first["resumed"], false, "{first}");

    let listed = client.call_tool("list_sessions", json!({})).await;
    let listed = listed.expect("list_sessions");
    let sessions = listed.as_array().unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(sessions.len(), 1, "{listed}");
    let session = &sessions[0];
    assert_eq!(session["session_id"], CLIENT_ID, "{listed}");
    assert_eq!(session["client_id"], CLIENT_ID, "{listed}");
    assert_eq!(session["machine"], MACHINE, "{listed}");
    assert_eq!(session["name"], "wb-test", "{listed}");

    // The same machine and client id again: the same session, resumed under its new name.
    let again = register(&client, "wb-test-renamed").await;
    assert_eq!(again["session_id"], CLIENT_ID, "{again}");
    assert_eq!(again["display_id"], first["display_id"], "{again}");
    assert_eq!(again["resumed"], true, "{again}");
    let listed = client.call_tool("list_sessions", json!({})).await;
    let listed = listed.expect("list_sessions");
    let names: Vec<&Value> = listed
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| &s["name"])
        .collect();
    assert_eq!(names, ["wb-test-renamed"], "{listed}");
}

#[tokio::test]
async fn real_bus_get_events_filters_by_type_newest_first_with_payloads_intact() {
    let Some(bus) = RealBus::start_or_skip().await else {
        return;
    };
    let client = client(&bus);
    let channel = format!("session:{CLIENT_ID}");
    // What a payload may hold and must come back byte for byte: quotes, JSON, a newline,
    // non-ASCII.
    let tricky = "review {\"pr\": 42, \"path\": \"src/a b.rs\"}\nline two: \u{e9}t\u{e9} \u{2713}";

    let older = publish(&client, "help_needed", tricky, &channel).await;
    let other = publish(&client, "task_completed", "not asked for", &channel).await;
    let newer = publish(&client, "help_needed", "second", &channel).await;
    assert!(
        older < other && other < newer,
        "ids {older} {other} {newer}"
    );

    let args = json!({"event_types": ["help_needed"], "order": "desc", "channel": channel});
    let got = events(&client, args).await;
    let ids: Vec<Option<i64>> = got.iter().map(|e| e["id"].as_i64()).collect();
    assert_eq!(ids, [Some(newer), Some(older)], "{got:?}");
    assert_eq!(got[0]["payload"], "second");
    assert_eq!(got[1]["payload"], tricky);
    for event in &got {
        assert_eq!(event["event_type"], "help_needed", "{event}");
        assert_eq!(event["channel"], channel, "{event}");
        // Published without a session: the bus says whose it is.
        assert_eq!(event["session_id"], "anonymous", "{event}");
    }

    // Oldest first on request; the other type is there when not filtered out.
    let ascending = events(&client, json!({"order": "asc", "channel": channel})).await;
    let ids: Vec<Option<i64>> = ascending.iter().map(|e| e["id"].as_i64()).collect();
    assert_eq!(
        ids,
        [Some(older), Some(other), Some(newer)],
        "{ascending:?}"
    );
}

#[tokio::test]
async fn real_bus_keeps_sessions_and_events_across_a_restart_on_the_same_database() {
    let Some(mut bus) = RealBus::start_or_skip().await else {
        return;
    };
    // One client throughout, as the daemon keeps one: its pooled connection dies with the bus.
    let client = client(&bus);
    register(&client, "wb-test").await;
    let channel = format!("session:{CLIENT_ID}");
    let before = publish(&client, "help_needed", "from before the restart", &channel).await;
    let (port, old_pid) = (bus.port(), bus.pid());

    bus.restart().await;
    assert_eq!(bus.port(), port);
    assert_ne!(bus.pid(), old_pid, "a new bus process");
    assert!(bus.db_path().is_file(), "{}", bus.db_path().display());

    let args = json!({"event_types": ["help_needed"], "order": "desc"});
    let got = events(&client, args.clone()).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["id"].as_i64(), Some(before), "{got:?}");
    assert_eq!(got[0]["payload"], "from before the restart");
    let listed = client.call_tool("list_sessions", json!({})).await;
    let listed = listed.expect("list_sessions");
    assert_eq!(listed[0]["session_id"], CLIENT_ID, "{listed}");

    // Ids go on from where they were.
    let after = publish(&client, "help_needed", "from after", &channel).await;
    assert!(after > before, "{after} after {before}");
    let ids: Vec<Option<i64>> = events(&client, args)
        .await
        .iter()
        .map(|e| e["id"].as_i64())
        .collect();
    assert_eq!(ids, [Some(after), Some(before)]);
}
