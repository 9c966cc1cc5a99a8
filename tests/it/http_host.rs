//! The Host guard: ahead of routing, on every path and method; loopback literals, the hook
//! host, the bind address and `--allowed-hosts` pass; everything else is 421.

use serde_json::json;
use wakebridge::config::Flags;
use wakebridge::wire::signature::Secret;

use crate::common::harness::{DEFAULT_EVENT, TestServer, raw_request, status_of};

async fn send(
    server: &TestServer,
    method: &str,
    path: &str,
    host: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> u16 {
    let mut raw = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        raw.push_str(&format!("{k}: {v}\r\n"));
    }
    raw.push_str("\r\n");
    raw.push_str(body);
    let addr = server.addr;
    let response = tokio::task::spawn_blocking(move || raw_request(addr, raw.as_bytes(), false))
        .await
        .expect("join");
    status_of(&response)
}

const JSON: (&str, &str) = ("Content-Type", "application/json");

#[tokio::test]
async fn loopback_spellings_pass_and_foreign_hosts_get_421_everywhere() {
    let server = TestServer::start(&[]).await;
    let hosts = [
        "127.0.0.1:8082",
        "localhost:8082",
        "localhost",
        "[::1]:8082",
        "[::1]",
        "LOCALHOST",
    ];
    for (i, host) in hosts.into_iter().enumerate() {
        // Distinct events: identical bodies would be recognised as redeliveries.
        let body = DEFAULT_EVENT.replace(r#""event_id":1"#, &format!(r#""event_id":{i}"#));
        assert_eq!(
            send(&server, "POST", "/hook", host, &[JSON], &body).await,
            200,
            "{host}"
        );
    }
    for host in [
        "evil.example:8082",
        "evil.example",
        "testserver",
        "localhost.",
        "::1",
        "",
    ] {
        assert_eq!(
            send(&server, "POST", "/hook", host, &[JSON], DEFAULT_EVENT).await,
            421,
            "{host:?}"
        );
    }
    for (method, path) in [
        ("GET", "/health"),
        ("HEAD", "/health"),
        ("GET", "/hook"),
        ("GET", "/nope"),
        ("OPTIONS", "/hook"),
    ] {
        assert_eq!(
            send(&server, method, path, "evil.example", &[], "").await,
            421,
            "{method} {path}"
        );
    }
    assert_eq!(server.spool_lines("target-1").len(), 6);
}

#[tokio::test]
async fn missing_host_header_is_421() {
    let server = TestServer::start(&[]).await;
    let addr = server.addr;
    let raw = b"GET /health HTTP/1.0\r\n\r\n";
    let response = tokio::task::spawn_blocking(move || raw_request(addr, raw, false))
        .await
        .expect("join");
    assert_eq!(status_of(&response), 421, "{response}");
    assert!(response.contains("unexpected Host"));
}

#[tokio::test]
async fn hook_host_and_allowed_hosts_pass() {
    let secret = "s3cret";
    let server = TestServer::start(&[
        ("AGENT_EVENT_BUS_BRIDGE_SECRET", secret),
        (
            "AGENT_EVENT_BUS_BRIDGE_HOOK_URL",
            "http://bridge.tailnet.example:8082/hook",
        ),
        (
            "AGENT_EVENT_BUS_BRIDGE_ALLOWED_HOSTS",
            " proxy.example , 10.0.0.5:8082,",
        ),
    ])
    .await;
    let sig = Secret::new(secret).sign(DEFAULT_EVENT.as_bytes());
    let signed = [JSON, ("X-Event-Bus-Signature", sig.as_str())];
    for host in [
        "bridge.tailnet.example:8082",
        "proxy.example",
        "10.0.0.5:8082",
        "127.0.0.1",
    ] {
        assert_eq!(
            send(&server, "POST", "/hook", host, &signed, DEFAULT_EVENT).await,
            200,
            "{host}"
        );
    }
    for host in ["evil.example", "p", "0.0.0.0"] {
        assert_eq!(
            send(&server, "POST", "/hook", host, &signed, DEFAULT_EVENT).await,
            421,
            "{host}"
        );
    }
}

#[tokio::test]
async fn pinned_bind_address_is_allowed() {
    let flags = Flags {
        bind: Some("127.0.0.3".into()),
        ..Flags::default()
    };
    let server = TestServer::start_with(&[], flags).await;
    assert_eq!(server.addr.ip().to_string(), "127.0.0.3");
    assert_eq!(
        send(&server, "GET", "/health", "127.0.0.3:8082", &[], "").await,
        200
    );
    assert_eq!(
        send(&server, "GET", "/health", "127.0.0.4", &[], "").await,
        421
    );
}

#[tokio::test]
async fn rejection_body_names_the_host() {
    let server = TestServer::start(&[]).await;
    let resp = server
        .client
        .get(server.url("/health"))
        .header("host", "evil.example:8082")
        .send()
        .await
        .expect("req");
    assert_eq!(resp.status().as_u16(), 421);
    assert_eq!(
        resp.json::<serde_json::Value>().await.expect("json"),
        json!({"error": "unexpected Host 'evil.example:8082'"})
    );
}
