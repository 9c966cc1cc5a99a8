//! The spool on disk, driven over HTTP: modes, symlinks, another process holding the lock, a
//! drainer-style writer appending concurrently from another process, a vanished wake dir.

use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use crate::common;
use crate::common::harness::{DEFAULT_EVENT, TestServer, event_for};
use crate::common::process::ChildGuard;

#[tokio::test]
async fn files_are_private() {
    let server = TestServer::start(&[]).await;
    assert_eq!(server.hook(DEFAULT_EVENT, &[]).await.0, 200);
    assert_eq!(
        std::fs::metadata(&server.wake_dir).expect("stat").mode() & 0o777,
        0o700
    );
    for name in ["target-1.jsonl", "target-1.lock"] {
        assert_eq!(
            std::fs::metadata(server.wake_dir.join(name))
                .expect("stat")
                .mode()
                & 0o777,
            0o600,
            "{name}"
        );
    }
}

#[tokio::test]
async fn lock_held_by_another_process_is_500_after_the_deadline_and_others_flow() {
    let server = TestServer::start(&[]).await;
    let lock = server.wake_dir.join("stuck.lock");
    // A real drainer stand-in: util-linux flock holding the session's lock in another process.
    let child = std::process::Command::new("flock")
        .arg(&lock)
        .args(["sleep", "30"])
        .spawn()
        .expect("flock");
    let _guard = ChildGuard::new(child);
    while !lock.exists() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let stuck = server.hook(event_for("stuck", 1), &[]);
    let other = async {
        let t = Instant::now();
        let r = server.hook(event_for("free", 2), &[]).await;
        (r, t.elapsed())
    };
    let ((stuck_status, stuck_body), ((free_status, _), free_elapsed)) = tokio::join!(stuck, other);
    let elapsed = started.elapsed();
    assert_eq!(stuck_status, 500);
    assert!(
        stuck_body["error"]
            .as_str()
            .is_some_and(|e| !e.contains("stuck.lock")),
        "no internals in 5xx: {stuck_body}"
    );
    assert!(
        elapsed >= Duration::from_millis(1900) && elapsed < Duration::from_millis(3500),
        "{elapsed:?}"
    );
    assert_eq!(free_status, 200);
    assert!(free_elapsed < Duration::from_secs(1), "{free_elapsed:?}");
    assert!(!server.wake_dir.join("stuck.jsonl").exists());
}

#[tokio::test]
async fn symlinked_spool_is_refused_and_target_untouched() {
    let server = TestServer::start(&[]).await;
    let victim = server.root.path().join("victim");
    std::os::unix::fs::symlink(&victim, server.wake_dir.join("target-1.jsonl")).expect("symlink");
    assert_eq!(server.hook(DEFAULT_EVENT, &[]).await.0, 500);
    assert!(!victim.exists());
}

#[tokio::test]
async fn vanished_wake_dir_is_recreated() {
    let server = TestServer::start(&[]).await;
    assert_eq!(server.hook(DEFAULT_EVENT, &[]).await.0, 200);
    std::fs::remove_dir_all(&server.wake_dir).expect("rm -rf");
    assert_eq!(server.hook(event_for("target-1", 2), &[]).await.0, 200);
    assert_eq!(server.spool_lines("target-1").len(), 1);
    assert_eq!(
        std::fs::metadata(&server.wake_dir).expect("stat").mode() & 0o777,
        0o700
    );
}

/// A second process appends through the same flock protocol (Python's fcntl.flock, as the
/// reference's tools do) while the daemon appends under load: no line is lost or torn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_from_another_process_interleave_without_tearing() {
    let server = TestServer::start(&[]).await;
    let wake = server.wake_dir.clone();
    let script = r#"
import fcntl, os, sys
d = sys.argv[1]
for i in range(200):
    fd = os.open(os.path.join(d, "shared.lock"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    with open(os.path.join(d, "shared.jsonl"), "a") as f:
        f.write('{"other": %d, "pad": "%s"}\n' % (i, "z" * 5000))
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
"#;
    let Ok(child) = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&wake)
        .spawn()
    else {
        common::skip_or_fail("python3 does not run", common::GET_PYTHON3);
        return;
    };
    let mut guard = ChildGuard::new(child);
    let sends = (0..200).map(|i| server.hook(event_for("shared", i), &[]));
    for (status, _) in futures::future::join_all(sends).await {
        assert_eq!(status, 200);
    }
    assert!(guard.0.wait().expect("wait").success());
    let lines = server.spool_lines("shared");
    assert_eq!(lines.len(), 400);
    for line in &lines {
        serde_json::from_str::<serde_json::Value>(line).expect("every line is whole JSON");
    }
}
