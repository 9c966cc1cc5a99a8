//! Registration as `serve` runs it: the real app against a stub bus that speaks the real bus's
//! wire. The bus is down at start, comes up, loses our row, and sees it removed at shutdown.

use std::time::Duration;

use crate::common;
use crate::common::harness::TestServer;
use crate::common::stub_bus::StubBus;

const HOOK_URL: &str = "http://127.0.0.1:8082/hook";

async fn health(server: &TestServer) -> serde_json::Value {
    server.get_json("/health").await
}

/// Polls /health until `want(health)` holds, or fails after `limit`.
async fn wait_health(
    server: &TestServer,
    limit: Duration,
    want: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    common::eventually_ok("/health to match", limit, async || {
        let h = health(server).await;
        if want(&h) { Ok(h) } else { Err(h) }
    })
    .await
}

#[tokio::test]
async fn registers_when_the_bus_comes_up_keeps_the_row_and_removes_it_at_shutdown() {
    let mut bus = StubBus::start().await;
    bus.stop().await;
    let bus_url = bus.url();
    let server = TestServer::start(&[
        ("WAKEBRIDGE_REGISTRATION__ENABLED", "true"),
        ("WAKEBRIDGE_REGISTRATION__KEEP_INTERVAL", "200ms"),
        ("AGENT_EVENT_BUS_URL", bus_url.as_str()),
    ])
    .await;
    let h = health(&server).await;
    assert_eq!(h["registered"], false, "{h}");
    // A stale row at our URL (left by a SIGKILLed predecessor) and a row elsewhere.
    bus.restart().await;
    let stale = bus.insert_row(HOOK_URL, false);
    let elsewhere = bus.insert_row("http://127.0.0.1:9999/hook", true);
    let h = wait_health(&server, Duration::from_secs(10), |h| {
        h["registered"] == true
    })
    .await;
    let id = h["webhook_id"].as_i64().expect("webhook id");
    assert!(h["last_verified_at"].is_string(), "{h}");
    let ours = bus.rows_at(HOOK_URL);
    assert_eq!(ours.len(), 1, "stale row swept, one fresh row");
    assert_eq!((ours[0].webhook_id, ours[0].active), (id, true));
    assert_ne!(id, stale);
    assert_eq!(
        bus.rows_at("http://127.0.0.1:9999/hook")[0].webhook_id,
        elsewhere
    );

    // Someone deletes our row: the keeper notices and registers again.
    assert!(bus.delete_row(id));
    let h = wait_health(&server, Duration::from_secs(5), |h| {
        h["registered"] == true && h["webhook_id"].as_i64() != Some(id)
    })
    .await;
    assert_eq!(bus.rows_at(HOOK_URL).len(), 1, "{h}");

    server.stop().await;
    assert!(
        bus.rows_at(HOOK_URL).is_empty(),
        "row unregistered at shutdown"
    );
    assert_eq!(
        bus.rows_at("http://127.0.0.1:9999/hook").len(),
        1,
        "other rows untouched"
    );
}

/// A bus that answers 500s, then hangs, never touches `/hook`, and shutdown stays bounded.
#[tokio::test]
async fn a_broken_bus_never_slows_hook_and_shutdown_stays_bounded() {
    let bus = StubBus::start().await;
    bus.set_behaviour(crate::common::stub_bus::Behaviour::Status(500));
    let bus_url = bus.url();
    let server = TestServer::start(&[
        ("WAKEBRIDGE_REGISTRATION__ENABLED", "true"),
        ("AGENT_EVENT_BUS_URL", bus_url.as_str()),
    ])
    .await;
    let body = |id: u32| {
        crate::common::harness::DEFAULT_EVENT
            .replace(r#""event_id":1"#, &format!(r#""event_id":{id}"#))
    };
    let started = std::time::Instant::now();
    assert_eq!(server.hook(body(1), &[]).await.0, 200);
    bus.set_behaviour(crate::common::stub_bus::Behaviour::Hang);
    tokio::time::sleep(Duration::from_millis(1500)).await; // let a registration attempt hang
    assert_eq!(server.hook(body(2), &[]).await.0, 200);
    assert_eq!(health(&server).await["registered"], false);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let stopping = std::time::Instant::now();
    server.stop().await;
    assert!(
        stopping.elapsed() < Duration::from_secs(7),
        "shutdown took {:?}",
        stopping.elapsed()
    );
}
