//! A real daemon killed with SIGKILL and restarted: the ledger's pending rounds replay without duplicating a
//! line, and lines a host crash would have cut from a session file (simulated by truncating the
//! file while the daemon is dead) are put back exactly, even in a file a drainer renamed.

use crate::common;
use crate::common::harness::{Daemon, event_for, post_hook};

/// No background fsync during the test, so every round is still pending in the ledger at the kill.
const NO_CHECKPOINT: (&str, &str) = ("WAKEBRIDGE_SPOOL__SYNC_INTERVAL", "1h");

async fn start(root: &std::path::Path, client: &reqwest::Client) -> Daemon {
    let daemon = Daemon::spawn(root, &[NO_CHECKPOINT], None);
    daemon.wait_ready(client).await;
    daemon
}

async fn post(client: &reqwest::Client, daemon: &Daemon, body: String) -> u16 {
    let (status, answer, _) = post_hook(client, &daemon.addr, body).await;
    assert_ne!(status, 0, "request: {answer}");
    status
}

#[tokio::test]
async fn sigkill_then_restart_loses_nothing_and_duplicates_nothing() {
    let root = common::tempdir();
    let wake = root.path().join("wake");
    let client = reqwest::Client::new();
    let mut daemon = start(root.path(), &client).await;
    for i in 0..20 {
        assert_eq!(post(&client, &daemon, event_for("crash-a", i)).await, 200);
        assert_eq!(post(&client, &daemon, event_for("crash-b", i)).await, 200);
    }
    daemon.sigkill();
    let spool_a = wake.join("crash-a.jsonl");
    let spool_b = wake.join("crash-b.jsonl");
    let original_a = std::fs::read(&spool_a).expect("a");
    let original_b = std::fs::read(&spool_b).expect("b");
    assert_eq!(original_a.iter().filter(|&&b| b == b'\n').count(), 20);

    // What a host crash could leave: a's file cut in the middle of its 13th line; b's file taken
    // by a drainer (renamed) and cut to nothing.
    let cut = original_a
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(11)
        .map(|(i, _)| i + 30)
        .expect("12 lines");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&spool_a)
        .expect("open a")
        .set_len(cut as u64)
        .expect("cut a");
    let drained_b = wake.join("crash-b.jsonl.draining");
    std::fs::rename(&spool_b, &drained_b).expect("drain b");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&drained_b)
        .expect("open b")
        .set_len(0)
        .expect("cut b");

    let mut daemon = start(root.path(), &client).await;
    assert_eq!(
        std::fs::read(&spool_a).expect("a"),
        original_a,
        "a restored exactly"
    );
    assert_eq!(
        std::fs::read(&drained_b).expect("b"),
        original_b,
        "b restored in place"
    );
    assert!(!spool_b.exists(), "nothing appended twice to a new spool");
    daemon.log_saying(&["restored spool lines"]).await;

    // A plain SIGKILL loses nothing (the page cache survives the process): the replay finds
    // every line in place and adds none.
    for i in 20..25 {
        assert_eq!(post(&client, &daemon, event_for("crash-a", i)).await, 200);
    }
    daemon.sigkill();
    let before = std::fs::read(&spool_a).expect("a");
    let daemon = start(root.path(), &client).await;
    let after = std::fs::read(&spool_a).expect("a");
    assert_eq!(after, before);
    assert_eq!(after.iter().filter(|&&b| b == b'\n').count(), 25);
    assert!(!daemon.log_text().contains("restored spool lines"));
}
