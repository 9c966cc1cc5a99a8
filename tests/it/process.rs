//! The real binary: configuration refusals, `--help` despite bad values, singleton exclusion,
//! graceful shutdown on SIGTERM, the libraries each start loads.

use std::time::Duration;

use crate::common;
use crate::common::harness::{binary, free_port, wait_healthy};
use crate::common::process::ChildGuard;

#[test]
fn bad_values_exit_2_with_one_line_and_help_still_works() {
    let root = common::tempdir();
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
    let root = common::tempdir();
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
    let root = common::tempdir();
    std::fs::create_dir_all(root.path().join("run")).expect("run");
    let port = free_port().to_string();
    let first = binary(root.path(), &[])
        .args(["serve", "--port", &port])
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let mut first = ChildGuard::new(first);
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
    let server = crate::common::harness::TestServer::start(&[]).await;
    server
        .hook(crate::common::harness::DEFAULT_EVENT, &[])
        .await;
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
        lines.next().is_some_and(|h| h.starts_with("wakebridge ")),
        "{table}"
    );
    assert!(
        lines
            .next()
            .is_some_and(|h| h.starts_with("SESSION") && h.contains("STATE")),
        "{table}"
    );
    assert!(
        lines.any(|l| l.starts_with("target-1") && l.contains("no pane")),
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

/// How long SIGTERM may take to stop a daemon with nothing in flight (registration is off in
/// tests, so nothing waits for a bus).
const STOP_BOUND: Duration = Duration::from_secs(5);

/// Where the daemon's stderr goes in each case of the logging test.
enum Stderr {
    /// A pipe whose reader read the first line and went away (`serve 2>&1 | head -1`).
    Broken,
    /// A pipe whose reader never reads: full once 64 KiB of log are written.
    Full,
    Closed,
    DevFull,
}

/// Starts the daemon with `stderr`, makes it log (debug, a few thousand lines), sends SIGTERM
/// and returns how it ended and how long the stop took.
async fn stop_with_stderr(stderr: Stderr) -> (std::process::ExitStatus, Duration) {
    use std::io::Read;
    use std::os::unix::process::CommandExt;

    let root = common::tempdir();
    std::fs::create_dir_all(root.path().join("run")).expect("run");
    let port = free_port().to_string();
    let mut cmd = binary(root.path(), &[("DEV_MODE", "1")]);
    cmd.args(["serve", "--port", &port])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null());
    let mut reader = None;
    match stderr {
        Stderr::Broken | Stderr::Full => {
            let (r, w) = std::io::pipe().expect("pipe");
            cmd.stderr(w);
            reader = Some(r);
        }
        Stderr::Closed => {
            // SAFETY: close(2) is async-signal-safe; it runs in the child between fork and exec.
            unsafe {
                cmd.pre_exec(|| {
                    libc::close(2);
                    Ok(())
                });
            }
        }
        Stderr::DevFull => {
            let full = std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .expect("/dev/full");
            cmd.stderr(full);
        }
    }
    let child = ChildGuard::new(cmd.spawn().expect("spawn"));
    drop(cmd);
    if let (Stderr::Broken, Some(mut r)) = (&stderr, reader.take()) {
        let mut first = [0u8; 64];
        let _ = r.read(&mut first).expect("the daemon logs at start");
        drop(r);
    }
    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    assert!(wait_healthy(&client, &format!("{base}/health"), Duration::from_secs(10)).await);
    // Debug logging names each spooled event's id: with 4 KiB ids, 100 deliveries write far
    // more than a pipe holds.
    let long_id = "i".repeat(4096);
    for i in 0..100 {
        let body = crate::common::harness::DEFAULT_EVENT
            .replace(r#""event_id":1"#, &format!(r#""event_id":"{long_id}-{i}""#));
        let answer = client
            .post(format!("{base}/hook"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("request");
        assert_eq!(
            answer.status(),
            200,
            "the daemon keeps serving while its log is stuck"
        );
    }
    let started = std::time::Instant::now();
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc::kill(child.0.id() as i32, libc::SIGTERM) };
    let mut child = child;
    let status = tokio::task::spawn_blocking(move || {
        let deadline = std::time::Instant::now() + STOP_BOUND * 2;
        loop {
            if let Some(status) = child.0.try_wait().expect("wait") {
                return Some(status);
            }
            if std::time::Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    })
    .await
    .expect("join")
    .expect("the daemon stops after SIGTERM");
    drop(reader);
    (status, started.elapsed())
}

#[tokio::test]
async fn sigterm_stops_the_daemon_whatever_became_of_its_stderr() {
    for (name, stderr) in [
        ("a broken pipe", Stderr::Broken),
        ("a full pipe", Stderr::Full),
        ("a closed stderr", Stderr::Closed),
        ("/dev/full", Stderr::DevFull),
    ] {
        let (status, took) = stop_with_stderr(stderr).await;
        assert_eq!(status.code(), Some(0), "with {name}: {status:?}");
        assert!(took < STOP_BOUND, "with {name} the stop took {took:?}");
    }
}

/// Each start loads libc alone (`wakebridge hook` starts on every tool call): no libm.so for
/// the one `pow` `main.rs` answers, no libgcc_s.so (its constructor probes the CPU, costly on a
/// virtual machine). A dependency that calls another libm function brings libm back: here.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn each_start_of_the_binary_loads_libc_alone() {
    let out = std::process::Command::new("ldd")
        .arg(env!("CARGO_BIN_EXE_wakebridge"))
        .output()
        .expect("ldd, from glibc's libc-bin");
    let listed = String::from_utf8_lossy(&out.stdout);
    let libraries: Vec<&str> = (listed.lines())
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| name.starts_with("lib"))
        .collect();
    assert_eq!(libraries, ["libc.so.6"], "{listed}");
}
