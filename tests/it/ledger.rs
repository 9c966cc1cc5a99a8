//! The ledger through the real server: redeliveries recognised (also across a restart), the
//! cooldown surviving a restart, machine scoping, `/sessions` and `/metrics`.

use std::time::Instant;

use serde_json::json;
use sha2::{Digest, Sha256};

use crate::common::harness::{TestServer, event_for, record_delivered};
use wakebridge::config::Flags;

/// More deliveries inside the identity window than the dedupe memory held before issue 28
/// (65 536): a start-up that reads only the newest ones forgets the oldest.
const MORE_THAN_THE_OLD_CAP: u64 = 70_000;

fn event(sid: &str, id: u32, timestamp: &str) -> String {
    event_for(sid, id).replace("2026-08-08T00:00:00", timestamp)
}

#[tokio::test]
async fn the_bus_retry_pattern_spools_once_and_survives_a_restart() {
    let server = TestServer::start(&[]).await;
    let body = event("s1", 7, "2026-11-30T10:00:00.000001");
    let first = server.hook(body.clone(), &[]).await;
    assert_eq!(
        first,
        (
            200,
            json!({"status": "delivered", "action": "spool", "session_id": "s1"})
        )
    );
    for _ in 0..2 {
        let again = server.hook(body.clone(), &[]).await;
        assert_eq!(
            again,
            (
                200,
                json!({"status": "delivered", "action": "spool", "session_id": "s1", "duplicate": true})
            )
        );
    }
    assert_eq!(server.spool_lines("s1").len(), 1);
    // A reset bus reuses event ids: same id, another timestamp, is a new event.
    let reused_id = event("s1", 7, "2026-11-30T11:00:00.000002");
    assert!(
        server
            .hook(reused_id, &[])
            .await
            .1
            .get("duplicate")
            .is_none()
    );
    assert_eq!(server.spool_lines("s1").len(), 2);

    let root = server.stop().await;
    let server = TestServer::start_in(root, &[], Flags::default()).await;
    assert_eq!(server.hook(body, &[]).await.1["duplicate"], true);
    assert_eq!(server.spool_lines("s1").len(), 2);
}

/// Issue 28: every identity whose 200 went out inside the window is recognised by a later
/// instance, however many there were. The later deliveries are written to the ledger directly,
/// as a daemon records them (one row per event, the identity its body's digest).
#[tokio::test]
async fn a_restart_recognises_every_identity_of_the_window_however_many() {
    let server = TestServer::start(&[]).await;
    let oldest: Vec<String> = (1..=3)
        .map(|id| event("s1", id, "2026-11-30T10:00:00"))
        .collect();
    for body in &oldest {
        let (status, answer) = server.hook(body.clone(), &[]).await;
        assert_eq!((status, answer.get("duplicate")), (200, None), "{answer}");
    }
    let root = server.stop().await;
    let later = |i: u64| event("s2", 100 + i as u32, "2026-11-30T11:00:00");
    let filled = Instant::now();
    let identities = (0..MORE_THAN_THE_OLD_CAP).map(|i| hex::encode(Sha256::digest(later(i))));
    record_delivered(root.path(), "s2", identities).await;
    let filled = filled.elapsed();
    let started = Instant::now();
    let server = TestServer::start_in(root, &[], Flags::default()).await;
    let started = started.elapsed();
    let retries = oldest
        .iter()
        .cloned()
        .chain([later(0), later(MORE_THAN_THE_OLD_CAP - 1)]);
    for body in retries {
        let (status, answer) = server.hook(body.clone(), &[]).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(
            (&answer["action"], &answer["duplicate"]),
            (&json!("spool"), &json!(true)),
            "a retry of {body} after {MORE_THAN_THE_OLD_CAP} later deliveries and a restart: {answer}"
        );
    }
    assert_eq!(server.spool_lines("s1").len(), oldest.len());
    assert!(server.spool_lines("s2").is_empty(), "a retry was appended");
    eprintln!("ledger filled in {filled:?}, restarted over it in {started:?}");
}

#[tokio::test]
async fn a_short_identity_window_forgets() {
    let server = TestServer::start(&[("WAKEBRIDGE_LEDGER__IDENTITY_WINDOW", "300ms")]).await;
    let body = event("s1", 1, "2026-11-30T10:00:00");
    server.hook(body.clone(), &[]).await;
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert!(server.hook(body, &[]).await.1.get("duplicate").is_none());
    assert_eq!(server.spool_lines("s1").len(), 2);
}

#[tokio::test]
async fn local_scope_ignores_unknown_sessions_and_touches_nothing() {
    let server = TestServer::start(&[("WAKEBRIDGE_BRIDGE__SCOPE", "local")]).await;
    let (status, body) = server.hook(event("stranger", 1, "t"), &[]).await;
    assert_eq!(
        (status, body),
        (
            200,
            json!({"status": "ignored", "reason": "not a local session"})
        )
    );
    assert!(
        server
            .wake_files()
            .iter()
            .all(|f| !f.starts_with("stranger")),
        "{:?}",
        server.wake_files()
    );
    let target = wakebridge::wakedir::target::PaneTarget::Tmux {
        pane: "%1".into(),
        session: None,
    };
    wakebridge::wakedir::set_entry(&server.wake_dir, "mine", &target).expect("map");
    assert_eq!(
        server.hook(event("mine", 2, "t"), &[]).await.1["status"],
        "delivered"
    );
}

#[tokio::test]
async fn sessions_and_metrics_report_what_happened() {
    let server = TestServer::start(&[]).await;
    server.hook(event("s1", 1, "a"), &[]).await;
    server.hook(event("s1", 2, "b"), &[]).await;
    server.hook(event("s1", 2, "b"), &[]).await;
    // Delivery rows are group-committed after the answer: give the writer a moment.
    let mut s1 = serde_json::Value::Null;
    for _ in 0..50 {
        let sessions = server.get_json("/sessions").await;
        s1 = sessions["sessions"]
            .as_array()
            .and_then(|a| a.iter().find(|s| s["session_id"] == "s1"))
            .cloned()
            .unwrap_or_default();
        if s1["last_action"] == "spool" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(40)).await;
    }
    assert_eq!(s1["spool_lines"], 2);
    assert_eq!(s1["state"], "no-pane");
    assert_eq!(s1["last_action"], "spool");
    let resp = server
        .client
        .get(server.url("/metrics"))
        .send()
        .await
        .expect("req");
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .expect("ascii")
            .starts_with("text/plain")
    );
    let text = resp.text().await.expect("text");
    assert_exposition_format(&text);
    assert!(
        text.contains("wakebridge_deliveries_total{action=\"spool\",duplicate=\"true\"}"),
        "{text}"
    );
    assert!(
        text.contains("wakebridge_hook_duration_seconds_bucket"),
        "{text}"
    );
    // Every state is a sample from the start, at 0 when no session is in it.
    for state in <wakebridge::api::SessionState as strum::IntoEnumIterator>::iter() {
        let want = if state == wakebridge::api::SessionState::NoPane {
            1
        } else {
            0
        };
        let sample = format!(
            "wakebridge_sessions{{state=\"{}\"}} {want}\n",
            state.as_str()
        );
        assert!(text.contains(&sample), "{sample}{text}");
    }
    assert!(text.contains("wakebridge_spool_bytes "), "{text}");
    assert!(
        text.contains("\nwakebridge_log_lines_dropped_total 0\n"),
        "{text}"
    );
}

/// Every line is a comment (`# HELP`/`# TYPE`), blank, or `name{labels} value`.
fn assert_exposition_format(text: &str) {
    for line in text.lines() {
        if line.is_empty() || line.starts_with("# HELP ") || line.starts_with("# TYPE ") {
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("no value: {line}"));
        assert!(
            value.parse::<f64>().is_ok() || value == "+Inf",
            "bad value in {line}"
        );
        let name = series.split('{').next().unwrap_or_default();
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad name in {line}"
        );
        if let Some(labels) = series.strip_prefix(name) {
            assert!(
                labels.is_empty() || (labels.starts_with('{') && labels.ends_with('}')),
                "bad labels in {line}"
            );
        }
    }
}
