//! `[notify]` end to end: a real daemon whose wakes keep failing (its session is mapped to a
//! pane that is gone from a real tmux server) tells a real HTTP receiver once, at the third
//! failure in a row, in wakebridge's own words and never with the DM's payload; as JSON for a
//! Slack-compatible webhook; and as an `info` event on the session's channel of the bus.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::HeaderMap;
use serde_json::Value;
use wakebridge::wakedir::target::PaneTarget;

use crate::common::harness::{DEFAULT_EVENT, Daemon, post_hook};
use crate::common::stub_bus::StubBus;
use crate::common::tmux::TmuxServer;
use crate::common::{self, eventually};

const SID: &str = "0b1f1ed0-0000-4000-8000-00000000aaaa";
const PAYLOAD: &str = "TOP-SECRET-DM-PAYLOAD";
const WAIT: Duration = Duration::from_secs(10);

/// What the receiver got: each request's headers and body.
type Received = Arc<Mutex<Vec<(HeaderMap, String)>>>;

/// A webhook receiver on 127.0.0.1: answers 200 and keeps what it got.
async fn receiver() -> (String, Received) {
    let got: Received = Arc::default();
    let keep = got.clone();
    let app = axum::Router::new().route(
        "/topic",
        axum::routing::post(move |headers: HeaderMap, body: String| {
            let keep = keep.clone();
            async move {
                keep.lock().unwrap().push((headers, body));
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/topic", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, got)
}

/// A daemon with `env`, the session mapped to a pane that no longer exists, and five DMs.
async fn five_failed_wakes(env: &[(&str, &str)]) -> (tempfile::TempDir, Daemon, TmuxServer) {
    let root = common::tempdir();
    let tmux = TmuxServer::start();
    let gone = tmux.new_pane("sleep 600");
    tmux.tmux(&["kill-pane", "-t", &gone]);
    let wake_dir = root.path().join("wake");
    std::fs::create_dir_all(&wake_dir).unwrap();
    let target = PaneTarget::Tmux {
        pane: gone,
        session: None,
    };
    wakebridge::wakedir::set_entry(&wake_dir, SID, &target).unwrap();
    let socket = tmux.socket().display().to_string();
    let mut all = vec![
        ("AGENT_EVENT_BUS_BRIDGE_BACKEND", "mux"),
        ("WAKEBRIDGE_MUX__TMUX_SOCKET", socket.as_str()),
    ];
    all.extend_from_slice(env);
    let daemon = Daemon::spawn(root.path(), &all, None);
    let client = reqwest::Client::new();
    daemon.wait_ready(&client).await;
    for id in 1..=5 {
        let event = DEFAULT_EVENT
            .replace("session:target-1", &format!("session:{SID}"))
            .replace(r#""event_id":1"#, &format!(r#""event_id":{id}"#))
            .replace("need a review", PAYLOAD);
        let (status, body, _) = post_hook(&client, &daemon.addr, event).await;
        assert_eq!(
            (status, body["action"].as_str()),
            (200, Some("spool-stale-pane"))
        );
    }
    (root, daemon, tmux)
}

#[tokio::test]
async fn the_third_failed_wake_in_a_row_tells_a_human_once_in_our_words() {
    let (url, got) = receiver().await;
    let (_root, _daemon, _tmux) = five_failed_wakes(&[("WAKEBRIDGE_NOTIFY__URL", &url)]).await;
    eventually("the notice", WAIT, || !got.lock().unwrap().is_empty()).await;
    // Failures four and five are the same streak: nothing more.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = got.lock().unwrap().clone();
    assert_eq!(got.len(), 1, "{got:?}");
    let (headers, body) = &got[0];
    assert_eq!(headers["tags"], "wake-failing");
    assert_eq!(headers["title"], "wakebridge: 0b1f1ed0");
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain"),
        "{headers:?}"
    );
    assert!(
        body.starts_with("0b1f1ed0 could not be woken three times in a row (last: "),
        "{body}"
    );
    assert!(!body.contains(PAYLOAD), "{body}");
}

#[tokio::test]
async fn json_for_chat_webhooks_and_an_info_event_on_the_bus() {
    let (url, got) = receiver().await;
    let bus = StubBus::start().await;
    let bus_url = bus.url();
    let (_root, daemon, _tmux) = five_failed_wakes(&[
        ("WAKEBRIDGE_NOTIFY__URL", &url),
        ("WAKEBRIDGE_NOTIFY__FORMAT", "json"),
        ("WAKEBRIDGE_NOTIFY__BUS", "true"),
        ("AGENT_EVENT_BUS_URL", &bus_url),
    ])
    .await;
    let published = || bus.calls_of("publish_event");
    eventually("the notice and the bus event", WAIT, || {
        !published().is_empty() && !got.lock().unwrap().is_empty()
    })
    .await;
    let (headers, body) = got.lock().unwrap()[0].clone();
    assert_eq!(headers["content-type"], "application/json");
    let body: Value = serde_json::from_str(&body).unwrap();
    let text = body["text"].as_str().unwrap();
    assert!(text.contains("could not be woken three times"), "{body}");
    let event = &published()[0];
    assert_eq!(event["channel"], format!("session:{SID}"));
    assert_eq!(event["signal_level"], "info");
    assert_eq!(event["event_type"], "wakebridge_notice");
    assert_eq!(event["payload"], text);
    assert!(!event.to_string().contains(PAYLOAD), "{event}");
    // The counter says so.
    let metrics = reqwest::get(format!("http://{}/metrics", daemon.addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("wakebridge_notices_total{outcome=\"sent\"} 1"),
        "{metrics}"
    );
}

#[test]
fn a_notify_setting_that_cannot_work_stops_the_start_with_its_name() {
    let root = common::tempdir();
    std::fs::create_dir_all(root.path().join("run")).unwrap();
    let out = crate::common::harness::binary(
        root.path(),
        &[("WAKEBRIDGE_NOTIFY__URL", "ftp://example.com/x")],
    )
    .args([
        "serve",
        "--port",
        &crate::common::harness::free_port().to_string(),
    ])
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("notify.url"), "{stderr}");
}
