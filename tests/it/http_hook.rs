//! `POST /hook` end to end: every row of the reference's check order and its status code.

use serde_json::json;
use wakebridge::wire::signature::Secret;

use crate::common::harness::{DEFAULT_EVENT, TestServer, raw_request, status_of};

#[tokio::test]
async fn default_event_is_spooled_once_with_the_python_line() {
    let server = TestServer::start(&[]).await;
    let (status, body) = server.hook(DEFAULT_EVENT, &[]).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"status": "delivered", "action": "spool", "session_id": "target-1"})
    );
    let lines = server.spool_lines("target-1");
    assert_eq!(lines.len(), 1);
    assert_eq!(
        lines[0],
        r#"{"event_id": 1, "event_type": "help_needed", "payload": "need a review", "session_id": "sender-1", "timestamp": "2026-08-08T00:00:00", "channel": "session:target-1", "correlation_id": null, "signal_level": "actionable"}"#
    );
}

#[tokio::test]
async fn filter_arms_answer_200_and_touch_nothing() {
    let server = TestServer::start(&[]).await;
    for level in [
        r#""lifecycle""#,
        r#""info""#,
        "null",
        r#""Actionable""#,
        "5",
    ] {
        let body = DEFAULT_EVENT.replace(r#""actionable""#, level);
        let (status, resp) = server.hook(body, &[]).await;
        assert_eq!(
            (status, resp),
            (
                200,
                json!({"status": "ignored", "reason": "below actionable"})
            ),
            "{level}"
        );
    }
    for channel in [
        r#""repo:myrepo""#,
        "123",
        "true",
        r#"["session:x"]"#,
        r#"{"c":1}"#,
        "null",
        r#""all""#,
        r#""session:""#,
        r#""session:../../escape""#,
        r#""session:a:b""#,
    ] {
        let body = DEFAULT_EVENT.replace(r#""session:target-1""#, channel);
        let (status, resp) = server.hook(body, &[]).await;
        assert_eq!(
            (status, resp),
            (
                200,
                json!({"status": "ignored", "reason": "no target session"})
            ),
            "{channel}"
        );
    }
    assert!(
        server.wake_files().iter().all(|f| !f.ends_with(".jsonl")),
        "{:?}",
        server.wake_files()
    );
    assert!(!server.root.path().join("escape.jsonl").exists());
}

#[tokio::test]
async fn bad_json_and_shapes_are_400_and_write_nothing() {
    let server = TestServer::start(&[]).await;
    let deep = "[".repeat(300_000);
    let invalid: Vec<Vec<u8>> = vec![
        b"not-json{".to_vec(),
        b"\x80abc".to_vec(),
        deep.into_bytes(),
        br#"{"payload": NaN}"#.to_vec(),
        br#"{"payload": Infinity}"#.to_vec(),
        br#"{"x": -Infinity}"#.to_vec(),
        Vec::new(),
    ];
    for body in invalid {
        let (status, resp) = server.hook(body, &[]).await;
        assert_eq!((status, resp), (400, json!({"error": "invalid JSON"})));
    }
    for body in ["123", r#"["x"]"#, r#""bare""#, "null"] {
        let (status, resp) = server.hook(body, &[]).await;
        assert_eq!(
            (status, resp),
            (400, json!({"error": "expected a JSON object"})),
            "{body}"
        );
    }
    let overflow = DEFAULT_EVENT.replace(r#""need a review""#, "1e400");
    let (status, resp) = server.hook(overflow, &[]).await;
    assert_eq!(
        (status, resp),
        (
            400,
            json!({"error": "payload not serializable to a spool line"})
        )
    );
    assert!(
        server
            .wake_files()
            .iter()
            .all(|f| !f.starts_with("target-1")),
        "{:?}",
        server.wake_files()
    );
}

#[tokio::test]
async fn routing_never_redirects() {
    let server = TestServer::start(&[]).await;
    let c = &server.client;
    let status = |r: reqwest::Response| r.status().as_u16();
    assert_eq!(
        status(
            c.post(server.url("/hook/"))
                .header("content-type", "application/json")
                .body(DEFAULT_EVENT)
                .send()
                .await
                .expect("req")
        ),
        404
    );
    assert_eq!(
        status(c.get(server.url("/hook")).send().await.expect("req")),
        405
    );
    assert_eq!(
        status(c.get(server.url("/nope")).send().await.expect("req")),
        404
    );
    assert_eq!(
        status(
            c.request(reqwest::Method::OPTIONS, server.url("/hook"))
                .send()
                .await
                .expect("req")
        ),
        405
    );
    assert_eq!(
        status(c.head(server.url("/health")).send().await.expect("req")),
        200
    );
    assert!(server.spool_lines("target-1").is_empty());
}

#[tokio::test]
async fn content_type_must_be_json() {
    let server = TestServer::start(&[]).await;
    for ct in [
        Some("text/plain;charset=UTF-8"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        let mut req = server.client.post(server.url("/hook")).body(DEFAULT_EVENT);
        if let Some(ct) = ct {
            req = req.header("content-type", ct);
        }
        let resp = req.send().await.expect("req");
        assert_eq!(resp.status().as_u16(), 415, "{ct:?}");
        assert_eq!(
            resp.json::<serde_json::Value>().await.expect("json"),
            json!({"error": "Content-Type must be application/json"})
        );
    }
    assert!(server.spool_lines("target-1").is_empty());
    let resp = server
        .client
        .post(server.url("/hook"))
        .header("content-type", "Application/JSON; charset=utf-8")
        .body(DEFAULT_EVENT)
        .send()
        .await
        .expect("req");
    assert_eq!(resp.status().as_u16(), 200);
}

#[tokio::test]
async fn bodies_over_one_mebibyte_are_413_declared_or_streamed() {
    let server = TestServer::start(&[]).await;
    let big = format!(
        r#"{{"signal_level":"actionable","channel":"session:big","payload":"{}"}}"#,
        "x".repeat(2 << 20)
    );
    let (status, resp) = server.hook(big.clone(), &[]).await;
    assert_eq!((status, resp), (413, json!({"error": "body too large"})));
    // Chunked, no Content-Length: cut off while streaming.
    let addr = server.addr;
    let response = tokio::task::spawn_blocking(move || {
        let mut raw = b"POST /hook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n".to_vec();
        for chunk in big.as_bytes().chunks(64 * 1024) {
            raw.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
            raw.extend_from_slice(chunk);
            raw.extend_from_slice(b"\r\n");
        }
        raw.extend_from_slice(b"0\r\n\r\n");
        raw_request(addr, &raw, false)
    })
    .await
    .expect("join");
    assert_eq!(status_of(&response), 413, "{response}");
    // Exactly 1 MiB is allowed.
    let prefix = r#"{"signal_level":"actionable","channel":"session:big","payload":""#;
    let pad = wakebridge::http::MAX_BODY_BYTES - prefix.len() - 2;
    let exact = format!("{prefix}{}\"}}", "y".repeat(pad));
    assert_eq!(exact.len(), wakebridge::http::MAX_BODY_BYTES);
    let (status, resp) = server.hook(exact, &[]).await;
    assert_eq!((status, resp["action"].as_str()), (200, Some("spool")));
}

#[tokio::test]
async fn client_disconnect_mid_body_is_400_and_writes_nothing() {
    let server = TestServer::start(&[]).await;
    let addr = server.addr;
    let request = b"POST /hook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"partial\":";
    let response = tokio::task::spawn_blocking(move || raw_request(addr, request, true))
        .await
        .expect("join");
    assert_eq!(status_of(&response), 400, "{response}");
    assert!(response.contains("client disconnected mid-body"));
    assert!(server.wake_files().iter().all(|f| !f.ends_with(".jsonl")));
}

#[tokio::test]
async fn signature_is_required_only_with_a_secret() {
    let server = TestServer::start(&[("AGENT_EVENT_BUS_BRIDGE_SECRET", "s3cret")]).await;
    let good = Secret::new("s3cret").sign(DEFAULT_EVENT.as_bytes());
    let wrong_key = Secret::new("other").sign(DEFAULT_EVENT.as_bytes());
    let bare = good.trim_start_matches("sha256=").to_string();
    let upper = format!("sha256={}", bare.to_uppercase());
    for header in [
        None,
        Some(wrong_key.as_str()),
        Some(bare.as_str()),
        Some(upper.as_str()),
        Some("not-a-signature"),
    ] {
        let headers: Vec<(&str, &str)> = header
            .map(|h| ("X-Event-Bus-Signature", h))
            .into_iter()
            .collect();
        let (status, resp) = server.hook(DEFAULT_EVENT, &headers).await;
        assert_eq!(
            (status, resp),
            (401, json!({"error": "bad signature"})),
            "{header:?}"
        );
    }
    // Non-ASCII header bytes: a clean 401, never a 500.
    let addr = server.addr;
    let mut raw = format!("POST /hook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n", DEFAULT_EVENT.len()).into_bytes();
    raw.extend_from_slice(b"X-Event-Bus-Signature: sha256=caf\xe9\r\n\r\n");
    raw.extend_from_slice(DEFAULT_EVENT.as_bytes());
    let response = tokio::task::spawn_blocking(move || raw_request(addr, &raw, false))
        .await
        .expect("join");
    assert_eq!(status_of(&response), 401, "{response}");
    let (status, _) = server.hook("", &[]).await;
    assert_eq!(status, 401);
    assert!(server.spool_lines("target-1").is_empty());
    let (status, resp) = server
        .hook(DEFAULT_EVENT, &[("X-Event-Bus-Signature", &good)])
        .await;
    assert_eq!((status, resp["action"].as_str()), (200, Some("spool")));

    let open = TestServer::start(&[]).await;
    let (status, _) = open
        .hook(DEFAULT_EVENT, &[("X-Event-Bus-Signature", "garbage")])
        .await;
    assert_eq!(status, 200);
    let (status, resp) = open.hook("", &[]).await;
    assert_eq!((status, resp), (400, json!({"error": "invalid JSON"})));
}

#[tokio::test]
async fn health_tells_instances_apart() {
    let server = TestServer::start(&[]).await;
    let body = server.get_json("/health").await;
    assert_eq!(body["status"], "ok");
    assert_eq!(body["pid"], std::process::id());
    assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));
    assert!(
        body["started_at"]
            .as_str()
            .is_some_and(|s| s.ends_with('Z'))
    );
}
