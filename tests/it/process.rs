//! The real binary: configuration refusals, `--help` despite bad values, singleton exclusion,
//! graceful shutdown on SIGTERM.

use std::time::Duration;

use crate::harness::{ChildGuard, binary, free_port, wait_healthy};

#[test]
fn bad_values_exit_2_with_one_line_and_help_still_works() {
    let root = tempfile::tempdir().expect("tempdir");
    let out = binary(root.path(), &[("AGENT_EVENT_BUS_BRIDGE_PORT", "eight")])
        .arg("serve")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("AGENT_EVENT_BUS_BRIDGE_PORT") && stderr.contains("1 to 65535"),
        "{stderr}"
    );
    let help = binary(root.path(), &[("AGENT_EVENT_BUS_BRIDGE_PORT", "eight")])
        .args(["serve", "--help"])
        .output()
        .expect("run");
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("--busy-ttl"));
    for (name, value, needle) in [
        (
            "AGENT_EVENT_BUS_BRIDGE_BACKEND",
            "tmuxx",
            "AGENT_EVENT_BUS_BRIDGE_BACKEND",
        ),
        ("AGENT_EVENT_BUS_BRIDGE_COOLDOWN", "30s", "COOLDOWN"),
        (
            "AGENT_EVENT_BUS_BRIDGE_BIND",
            "0.0.0.0",
            "AGENT_EVENT_BUS_BRIDGE_SECRET",
        ),
        (
            "AGENT_EVENT_BUS_BRIDGE_ALLOWED_HOSTS",
            ":8082",
            "no hostname",
        ),
        ("AGENT_EVENT_BUS_WAKE_DIR", "wake", "--wake-dir"),
    ] {
        let out = binary(root.path(), &[(name, value)]).output().expect("run");
        assert_eq!(out.status.code(), Some(2), "{name}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn unpreparable_wake_dir_names_the_setting() {
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(root.path().join("run")).expect("run");
    let file = root.path().join("afile");
    std::fs::write(&file, "x").expect("write");
    let wake = file.join("wake");
    let out = binary(
        root.path(),
        &[("AGENT_EVENT_BUS_WAKE_DIR", wake.to_str().expect("utf8"))],
    )
    .args(["serve", "--port", &free_port().to_string()])
    .output()
    .expect("run");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--wake-dir"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn second_instance_exits_and_sigterm_stops_the_first_cleanly() {
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(root.path().join("run")).expect("run");
    let port = free_port().to_string();
    let first = binary(root.path(), &[])
        .args(["serve", "--port", &port])
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let mut first = ChildGuard(first);
    let client = reqwest::Client::new();
    assert!(
        wait_healthy(
            &client,
            &format!("http://127.0.0.1:{port}/health"),
            Duration::from_secs(10)
        )
        .await
    );
    let second = binary(root.path(), &[])
        .args(["serve", "--port", &port])
        .output()
        .expect("run");
    assert!(!second.status.success());
    assert!(
        String::from_utf8_lossy(&second.stderr).contains("already"),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc::kill(first.0.id() as i32, libc::SIGTERM) };
    let status = tokio::task::spawn_blocking(move || first.0.wait())
        .await
        .expect("join")
        .expect("wait");
    assert!(status.success(), "{status:?}");
}

/// `wakebridge status` and `wakebridge wake` talk to a running daemon over HTTP.
#[tokio::test]
async fn status_and_wake_verbs_talk_to_the_daemon() {
    let server = crate::harness::TestServer::start(&[]).await;
    server.hook(crate::harness::DEFAULT_EVENT, &[]).await;
    let url = format!("http://{}", server.addr);
    let root = server.root.path().to_path_buf();
    let (status, wake) = tokio::task::spawn_blocking(move || {
        let status = binary(&root, &[])
            .args(["status", "--url", &url])
            .output()
            .expect("status");
        let wake = binary(&root, &[])
            .args(["wake", "target-1", "--url", &url])
            .output()
            .expect("wake");
        (status, wake)
    })
    .await
    .expect("join");
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let table = String::from_utf8_lossy(&status.stdout);
    let mut lines = table.lines();
    assert!(
        lines
            .next()
            .is_some_and(|h| h.starts_with("SESSION") && h.contains("LAST ACTION")),
        "{table}"
    );
    assert!(
        lines.any(|l| l.starts_with("target-1") && l.contains("unmapped") && l.contains("1 lines")),
        "{table}"
    );
    assert!(
        !table.contains('\x1b'),
        "no colour when stdout is not a terminal"
    );
    // Nothing is mapped, so the wake is spooled-only: reported, and a non-zero exit.
    assert_eq!(
        String::from_utf8_lossy(&wake.stdout).trim(),
        "target-1: spool-unmapped"
    );
    assert_eq!(wake.status.code(), Some(1));
}
