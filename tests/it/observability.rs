//! What an operator's tools see: `/metrics` series that exist from the start with short
//! kebab-case label values and none per session, the journal's log format when stderr is the
//! journal, and the fleet's reads behind the bearer secret once other hosts can reach them.

use std::os::unix::fs::MetadataExt;
use std::process::Stdio;
use std::time::Duration;

use wakebridge::api::Action;
use wakebridge::config::Flags;

use crate::common;
use crate::common::harness::{Daemon, TestServer, binary, free_port, wait_healthy};

const SECRET: &str = "s3cret";

#[tokio::test]
async fn a_fresh_daemon_shows_every_counter_at_zero_and_its_build() {
    let root = common::tempdir();
    let daemon = Daemon::spawn(root.path(), &[], None);
    let client = reqwest::Client::new();
    daemon.wait_ready(&client).await;
    let text = client
        .get(format!("http://{}/metrics", daemon.addr))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut expected: Vec<String> = <Action as strum::IntoEnumIterator>::iter()
        .flat_map(|a| {
            ["false", "true"].map(|d| {
                format!(
                    "wakebridge_deliveries_total{{action=\"{}\",duplicate=\"{d}\"}} 0",
                    a.as_str()
                )
            })
        })
        .collect();
    for line in [
        "wakebridge_rejections_total{reason=\"bad-signature\"} 0",
        "wakebridge_rejections_total{reason=\"invalid-json\"} 0",
        "wakebridge_errors_total{kind=\"pane-busy\"} 0",
        "wakebridge_errors_total{kind=\"lock-timeout\"} 0",
        "wakebridge_limit_resumes_total{outcome=\"gave-up\"} 0",
        "wakebridge_rewinds_total{outcome=\"not-typed\"} 0",
        "wakebridge_bus_registered 0",
        "wakebridge_context_percent_max 0",
        "wakebridge_context_sessions{level=\"checkpoint\"} 0",
    ] {
        expected.push(line.to_string());
    }
    expected.push(format!(
        "wakebridge_build_info{{version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    ));
    for line in &expected {
        assert!(lines.contains(&line.as_str()), "no {line:?} in\n{text}");
    }
    // Label values are short kebab-case words (versions and bucket bounds aside), so no
    // series is per session, per path or per message.
    for line in lines.iter().filter(|l| !l.starts_with('#')) {
        let Some((_, labels)) = line.split_once('{') else {
            continue;
        };
        let labels = labels.split('}').next().unwrap();
        for pair in labels.split(',') {
            let (key, value) = pair.split_once('=').unwrap();
            let value = value.trim_matches('"');
            if key == "le" || key == "version" {
                continue;
            }
            assert!(
                value.len() <= 20
                    && value
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
                "label {key}={value:?} is not a short kebab-case word: {line}"
            );
        }
    }
}

#[tokio::test]
async fn under_the_journal_lines_carry_a_priority_and_no_timestamp() {
    let root = common::tempdir();
    std::fs::create_dir_all(root.path().join("run")).unwrap();
    let log = root.path().join("journal.log");
    let stream = std::fs::File::create(&log).unwrap();
    let meta = stream.metadata().unwrap();
    let journal = format!("{}:{}", meta.dev(), meta.ino());
    let port = free_port();
    let mut child = binary(root.path(), &[("JOURNAL_STREAM", &journal)])
        .args(["serve", "--port", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stream)
        .spawn()
        .unwrap();
    let client = reqwest::Client::new();
    let up = wait_healthy(
        &client,
        &format!("http://127.0.0.1:{port}/health"),
        Duration::from_secs(10),
    )
    .await;
    // SIGTERM: a clean stop, whose lines are flushed before exit.
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(up, "daemon did not start:\n{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(!lines.is_empty());
    for line in lines {
        let rest = ["<3>", "<4>", "<6>", "<7>"]
            .iter()
            .find_map(|p| line.strip_prefix(p))
            .unwrap_or_else(|| panic!("no priority prefix: {line:?}"));
        assert!(
            !rest.trim_start().starts_with(|c: char| c.is_ascii_digit()),
            "a timestamp of our own: {line:?}"
        );
    }
}

#[tokio::test]
async fn the_fleet_reads_need_the_secret_once_other_hosts_can_reach_them() {
    let open_to_all = Flags {
        bind: Some("0.0.0.0".into()),
        ..Flags::default()
    };
    let server =
        TestServer::start_with(&[("AGENT_EVENT_BUS_BRIDGE_SECRET", SECRET)], open_to_all).await;
    // Bound to every address: reach it at loopback, under the Host the allowlist knows.
    let get = |path: &str, token: Option<&str>| {
        let mut request = server
            .client
            .get(format!("http://127.0.0.1:{}{path}", server.addr.port()))
            .header("host", "127.0.0.1:8082");
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    for path in ["/sessions", "/metrics"] {
        let bare = get(path, None).await.unwrap();
        assert_eq!(bare.status(), 401, "{path}");
        let body: serde_json::Value = bare.json().await.unwrap();
        assert!(body["error"].as_str().unwrap().contains("Bearer"), "{body}");
        assert_eq!(
            get(path, Some("wrong")).await.unwrap().status(),
            401,
            "{path}"
        );
        assert_eq!(
            get(path, Some(SECRET)).await.unwrap().status(),
            200,
            "{path}"
        );
    }
    assert_eq!(get("/health", None).await.unwrap().status(), 200);

    // Loopback only: open, as before.
    let local = TestServer::start(&[("AGENT_EVENT_BUS_BRIDGE_SECRET", SECRET)]).await;
    for path in ["/sessions", "/metrics"] {
        let bare = local.client.get(local.url(path)).send().await.unwrap();
        assert_eq!(bare.status(), 200, "{path}");
    }
    // (Open to all without a secret does not start: the configuration refuses it.)
}
