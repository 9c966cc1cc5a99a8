//! The ledger and spool pruning against real SQLite files, real files and real flock(2) locks
//! (one held by a real child process).

use std::fs::{self, File};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use rusqlite::Connection;
use wakebridge::config::PruneSettings;
use wakebridge::spool::prune;
use wakebridge::store::{
    Alias, Delivery, DeliverySource, LimitSeen, LimitSource, NudgeState, Payment, Record,
    RewindOutcome, RewindWhy, SessionSeen, Store, StoreError,
};

use crate::common;
use crate::common::process::ChildGuard;

const HOUR_MS: i64 = 60 * 60 * 1000;
/// Upper bound on waiting for another thread or process to reach a state in these tests.
const SETTLE: Duration = Duration::from_secs(10);

fn delivery(target: &str, action: &str, at_ms: i64, identity: Option<&str>) -> Delivery {
    Delivery {
        at_ms,
        source: DeliverySource::Hook,
        identity: identity.map(str::to_owned),
        event_id: Some(format!("ev-{at_ms}")),
        sender: "sender-1".into(),
        target_session: target.into(),
        action: action.into(),
        spool_us: Some(120),
        inject_us: None,
        error_kind: None,
        owed: false,
    }
}

fn seen(sid: &str, at_ms: i64) -> SessionSeen {
    SessionSeen {
        session_id: sid.into(),
        cwd: Some("/work/project".into()),
        transcript_path: Some("/home/u/.claude/projects/p/s.jsonl".into()),
        pane: Some("tmux:%3".into()),
        last_hook_event: Some("Stop".into()),
        seen_at_ms: at_ms,
        kept: false,
        agent: Default::default(),
    }
}

fn count_rows(path: &Path, table: &str) -> i64 {
    let conn = Connection::open(path).expect("second connection");
    conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |row| {
        row.get(0)
    })
    .expect("count")
}

/// What the start-up warm-up reads since `since_ms`: (identity, action) of every delivery, in
/// the order it reads them.
fn identities_since(store: &Store, since_ms: i64) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    store
        .each_identity_since(since_ms, |s| {
            seen.push((s.identity.to_owned(), s.action.to_owned()));
        })
        .expect("identities");
    seen
}

/// An in-memory ledger (its writer thread started, so the test is bounded).
fn in_memory() -> Store {
    common::timeout::arm_test_timeout();
    Store::open_in_memory().expect("open an in-memory ledger")
}

async fn wait_until(what: &str, condition: impl FnMut() -> bool) {
    common::eventually(what, SETTLE, condition).await;
}

// ---------------------------------------------------------------------------------------------
// Ledger

#[tokio::test]
async fn acked_records_are_visible_from_another_connection() {
    let dir = common::tempdir();
    let path = dir.path().join("ledger.db");
    let store = Store::open(&path).expect("open");
    store
        .record(Record::Delivery(delivery(
            "s1",
            "tmux",
            wakebridge::clock::now_ms(),
            None,
        )))
        .await
        .expect("record");
    assert_eq!(count_rows(&path, "deliveries"), 1);
}

#[tokio::test]
async fn queued_callers_are_acked_only_after_their_shared_commit() {
    let dir = common::tempdir();
    let path = dir.path().join("ledger.db");
    let store = Store::open(&path).expect("open");
    // Another process's write transaction (like the hook CLI's) holds the write lock.
    let other = Connection::open(&path).expect("other connection");
    other
        .execute_batch("BEGIN IMMEDIATE")
        .expect("take write lock");
    let before = store.write_stats();

    // The writer takes the probe and waits for the lock inside its BEGIN.
    let probe = tokio::spawn({
        let store = store.clone();
        async move {
            store
                .record(Record::Delivery(delivery("p", "spool", 1, None)))
                .await
        }
    });
    tokio::task::yield_now().await;
    wait_until("the writer took the probe", || store.queued_writes() == 0).await;

    let callers: Vec<_> = (0..16)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let rec = delivery(&format!("s{i}"), "tmux", 10 + i, Some(&format!("id{i}")));
                store.record(Record::Delivery(rec)).await
            })
        })
        .collect();
    tokio::task::yield_now().await;
    wait_until("all 16 callers queued", || store.queued_writes() == 16).await;
    assert!(!probe.is_finished(), "acked before anything could commit");
    assert!(callers.iter().all(|caller| !caller.is_finished()));

    other.execute_batch("ROLLBACK").expect("release write lock");
    probe.await.expect("join").expect("probe committed");
    for caller in callers {
        caller.await.expect("join").expect("caller committed");
    }
    let after = store.write_stats();
    assert_eq!(after.commits - before.commits, 2, "probe, then one group");
    assert_eq!(after.largest_batch, 16);
    assert_eq!(count_rows(&path, "deliveries"), 17);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_concurrent_callers_are_all_acked() {
    let store = in_memory();
    let callers: Vec<_> = (0..100)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .record(Record::Delivery(delivery("s1", "tmux", i, None)))
                    .await
            })
        })
        .collect();
    for caller in callers {
        caller.await.expect("join").expect("acked");
    }
    assert_eq!(store.write_stats().jobs, 100);
    assert_eq!(common::delivery_counts(&store)["tmux"], 100);
}

#[tokio::test]
async fn a_failing_record_fails_only_its_own_caller() {
    let dir = common::tempdir();
    let path = dir.path().join("ledger.db");
    let store = Store::open(&path).expect("open");
    Connection::open(&path)
        .expect("other connection")
        .execute_batch(
            "CREATE TRIGGER refuse_boom BEFORE INSERT ON deliveries WHEN NEW.action = 'boom' \
             BEGIN SELECT RAISE(ABORT, 'boom refused'); END;",
        )
        .expect("trigger");
    let good = store.record(Record::Delivery(delivery("s1", "tmux", 1, None)));
    let bad = store.record(Record::Delivery(delivery("s1", "boom", 2, None)));
    let good2 = store.record(Record::Delivery(delivery("s1", "spool", 3, None)));
    let (good, bad, good2) = tokio::join!(good, bad, good2);
    good.expect("good committed");
    good2.expect("second good committed");
    let err = bad.expect_err("boom refused");
    assert!(matches!(err, StoreError::Write { .. }), "{err}");
    assert!(err.to_string().contains("boom refused"), "{err}");
    assert_eq!(count_rows(&path, "deliveries"), 2);
}

#[tokio::test]
async fn state_survives_a_restart() {
    let dir = common::tempdir();
    let path = dir.path().join("state").join("wakebridge.db");
    let now = wakebridge::clock::now_ms();
    {
        let store = Store::open(&path).expect("open");
        store
            .record(Record::Delivery(delivery("s1", "tmux", now, Some("abc"))))
            .await
            .expect("delivery");
        store
            .record(Record::SessionSeen(seen("s1", now)))
            .await
            .expect("seen");
        store
            .record(Record::Wake {
                session_id: "s1".into(),
                at_ms: now,
            })
            .await
            .expect("wake");
        store
            .record(Record::Nudge(NudgeState {
                session_id: "s1".into(),
                unanswered: 2,
                last_nudge_ms: Some(now),
                acknowledged: true,
            }))
            .await
            .expect("nudge");
    }
    let store = Store::open(&path).expect("reopen");
    assert_eq!(store.last_wakes().expect("wakes")["s1"], now);
    assert!(store.known_session("s1").expect("known"));
    assert_eq!(
        identities_since(&store, now - HOUR_MS),
        [("abc".to_string(), "tmux".to_string())]
    );
    let row = store.session("s1").expect("session").expect("present");
    assert_eq!(row.last_action.as_deref(), Some("tmux"));
    assert_eq!(
        row.nudge.map(|n| (n.unanswered, n.acknowledged)),
        Some((2, true))
    );
}

#[tokio::test]
async fn migrates_a_database_written_at_schema_one() {
    let dir = common::tempdir();
    let path = dir.path().join("old.db");
    {
        // What an older wakebridge that only knew migration 1 left on disk.
        let conn = Connection::open(&path).expect("create old db");
        conn.execute_batch("PRAGMA journal_mode = WAL;")
            .expect("wal");
        conn.execute_batch(include_str!("../../migrations/0001_ledger.sql"))
            .expect("schema 1");
        conn.execute_batch(
            "PRAGMA user_version = 1;
             INSERT INTO sessions (session_id, cwd, first_seen_ms, last_seen_ms)
                 VALUES ('old-session', '/old', 5, 6);
             INSERT INTO deliveries (at_ms, source, identity, sender, target_session, action)
                 VALUES (7, 'hook', 'feed', 'x', 'old-session', 'spool-busy');",
        )
        .expect("old rows");
    }
    let store = Store::open(&path).expect("open migrates");
    let row = store.session("old-session").expect("read").expect("kept");
    assert_eq!(row.cwd.as_deref(), Some("/old"));
    assert_eq!(row.last_action.as_deref(), Some("spool-busy"));
    assert_eq!(
        row.agent,
        wakebridge::agent::Agent::Claude,
        "a row from before agents"
    );
    store
        .record(Record::Wake {
            session_id: "old-session".into(),
            at_ms: 9,
        })
        .await
        .expect("table from migration 2 works");
    assert_eq!(store.last_wakes().expect("wakes")["old-session"], 9);
    drop(store);
    let version: i64 = Connection::open(&path)
        .expect("check")
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .expect("user_version");
    assert_eq!(version, 18);
    let told: Option<i64> = Connection::open(&path)
        .expect("check")
        .query_row(
            "SELECT told_ms FROM latest_deliveries WHERE session_id = 'old-session'",
            [],
            |row| row.get(0),
        )
        .expect("latest_deliveries");
    assert_eq!(told, Some(7), "migration 13 marks what the bus told before");
    let identity_index: i64 = Connection::open(&path)
        .expect("check")
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'deliveries_by_identity'",
            [],
            |row| row.get(0),
        )
        .expect("sqlite_master");
    assert_eq!(identity_index, 0, "migration 3 drops the identity index");
    let target_index: i64 = Connection::open(&path)
        .expect("check")
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'deliveries_by_target'",
            [],
            |row| row.get(0),
        )
        .expect("sqlite_master");
    assert_eq!(
        target_index, 0,
        "migration 4 replaces the per-session index"
    );
}

#[test]
fn refuses_a_corrupt_file_and_names_it() {
    let dir = common::tempdir();
    let path = dir.path().join("wakebridge.db");
    let garbage: Vec<u8> = (0..8192_u32).map(|i| (i * 7 % 251) as u8).collect();
    fs::write(&path, &garbage).expect("garbage");
    let err = Store::open(&path).expect_err("garbage refused");
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    let message = err.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("move it aside"), "{message}");
    assert_eq!(
        fs::read(&path).expect("still there"),
        garbage,
        "left untouched"
    );
}

#[tokio::test]
async fn refuses_a_ledger_with_damaged_pages() {
    let dir = common::tempdir();
    let path = dir.path().join("wakebridge.db");
    {
        let store = Store::open(&path).expect("open");
        for i in 0..2_000 {
            let rec = delivery(
                &format!("s{}", i % 50),
                "tmux",
                i,
                Some(&format!("{i:064x}")),
            );
            store.record(Record::Delivery(rec)).await.expect("record");
        }
    }
    // Closing checkpointed the WAL into the file; now damage pages past the header page.
    let mut bytes = fs::read(&path).expect("read");
    assert!(bytes.len() > 64 * 1024, "several pages of rows");
    let damaged = bytes.len() / 2..bytes.len() / 2 + 8192;
    bytes[damaged].fill(0xA5);
    fs::write(&path, &bytes).expect("damage");
    let err = Store::open(&path).expect_err("damage detected");
    assert!(
        matches!(err, StoreError::Damaged { .. } | StoreError::Corrupt { .. }),
        "{err}"
    );
    let message = err.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("move it aside"), "{message}");
    assert_eq!(
        fs::read(&path).expect("still there"),
        bytes,
        "left untouched"
    );
}

#[test]
fn refuses_a_database_from_a_newer_wakebridge() {
    let dir = common::tempdir();
    let path = dir.path().join("wakebridge.db");
    drop(Store::open(&path).expect("create"));
    Connection::open(&path)
        .expect("conn")
        .execute_batch("PRAGMA user_version = 99")
        .expect("bump");
    let err = Store::open(&path).expect_err("newer refused");
    assert!(matches!(err, StoreError::TooNew { found: 99, .. }), "{err}");
}

/// The first hooks of a fresh machine start together (Claude Code runs a session's hooks in
/// parallel, and several sessions start at once): real `wakebridge hook` processes opening one
/// new ledger at the same moment all record, none answers "database is locked" or mistakes a
/// half-made ledger for another program's. Before the fix about 1 in 60 such hooks failed.
#[test]
fn the_first_hooks_of_a_fresh_ledger_all_record_at_once() {
    const HOOKS: usize = 8;
    const ROUNDS: usize = 15;
    for round in 0..ROUNDS {
        let dir = common::tempdir();
        let hooks: Vec<_> = (0..HOOKS)
            .map(|i| {
                let mut cmd = common::harness::binary(dir.path(), &[]);
                cmd.arg("hook");
                let payload = serde_json::json!({
                    "session_id": format!("00000000-0000-4000-8000-{i:012}"),
                    "hook_event_name": "SessionStart",
                    "source": "startup",
                    "cwd": "/work",
                });
                std::thread::spawn(move || common::harness::fed(cmd, &payload.to_string()))
            })
            .collect();
        for hook in hooks {
            let out = hook.join().expect("hook thread");
            assert!(
                out.status.success() && out.stderr.is_empty(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let ledger = dir.path().join("state/wakebridge/wakebridge.db");
        assert_eq!(
            count_rows(&ledger, "sessions"),
            HOOKS as i64,
            "round {round}"
        );
    }
}

#[test]
fn refuses_another_programs_database() {
    let dir = common::tempdir();
    let path = dir.path().join("other.db");
    Connection::open(&path)
        .expect("conn")
        .execute_batch("CREATE TABLE precious (x); INSERT INTO precious VALUES (1);")
        .expect("other db");
    let err = Store::open(&path).expect_err("foreign refused");
    assert!(matches!(err, StoreError::NotALedger { .. }), "{err}");
    assert_eq!(count_rows(&path, "precious"), 1);
}

#[tokio::test]
async fn recreates_a_deleted_file_with_private_modes() {
    let dir = common::tempdir();
    let state = dir.path().join("a").join("b");
    let path = state.join("wakebridge.db");
    {
        let store = Store::open(&path).expect("open");
        store
            .record(Record::Delivery(delivery("s1", "tmux", 1, None)))
            .await
            .expect("record");
    }
    for suffix in ["", "-wal", "-shm"] {
        let file = PathBuf::from(format!("{}{suffix}", path.display()));
        if file.exists() {
            fs::remove_file(file).expect("delete");
        }
    }
    let store = Store::open(&path).expect("recreated");
    assert!(common::delivery_counts(&store).is_empty());
    let mode = |p: &Path| fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode(&state), 0o700);
    assert_eq!(mode(&dir.path().join("a")), 0o700);
    assert_eq!(mode(&path), 0o600);
    let wal = PathBuf::from(format!("{}-wal", path.display()));
    assert_eq!(mode(&wal), 0o600, "SQLite copies the database's mode");
}

#[tokio::test]
async fn prunes_identities_outside_the_retention_window() {
    let store = in_memory();
    let now = wakebridge::clock::now_ms();
    for (at, identity, action) in [
        (now - 25 * HOUR_MS, "old", "tmux"),
        (now - HOUR_MS, "recent", "spool-busy"),
        (now - 30 * 60 * 1000, "recent", "spool-cooldown"),
    ] {
        store
            .record(Record::Delivery(delivery("s1", action, at, Some(identity))))
            .await
            .expect("record");
    }
    let cutoff = now - 24 * HOUR_MS;
    assert_eq!(identities_since(&store, now - 48 * HOUR_MS).len(), 3);
    assert_eq!(store.prune_older_than(cutoff).await.expect("prune"), 1);
    let ids = identities_since(&store, cutoff);
    assert_eq!(ids.len(), 2);
    assert!(ids.iter().all(|(identity, _)| identity == "recent"));
    assert_eq!(
        ids[1].1, "spool-cooldown",
        "the latest delivery of the identity comes last"
    );
    let counts = common::delivery_counts(&store);
    assert_eq!(counts.get("tmux"), None);
    assert_eq!(counts["spool-busy"], 1);
    assert_eq!(store.prune_older_than(cutoff).await.expect("again"), 0);
}

fn owed(target: &str, at_ms: i64) -> Delivery {
    Delivery {
        owed: true,
        ..delivery(target, "spool-busy", at_ms, None)
    }
}

/// While the daemon sends the wake that pays a session's debt, the session's Stop hook leaves
/// the debt to it: one debt, one telling. The wake's payment or its refusal ends the claim; one
/// nothing ended (a crash mid-send) lapses.
#[tokio::test]
async fn a_claimed_debt_is_the_daemons_to_tell_until_paid_or_lapsed() {
    let store = in_memory();
    let path = store.path().to_path_buf();
    let minute = Duration::from_secs(60);
    let hook_pays = |sid| Store::pay_once(&path, sid, Payment::Hook, |_| true).expect("pay");
    let owe = |sid: &'static str| {
        store.record(Record::Delivery(owed(sid, wakebridge::clock::now_ms() - 1)))
    };

    assert_eq!(store.claim_owed("s2", minute).await.expect("claim"), 0);
    owe("s2").await.expect("owe");
    assert_eq!(
        hook_pays("s2"),
        1,
        "nothing was owed, so nothing was claimed"
    );

    owe("s1").await.expect("owe");
    assert_eq!(store.claim_owed("s1", minute).await.expect("claim"), 1);
    let told = Store::pay_once(&path, "s1", Payment::Hook, |_| panic!("told twice"));
    assert_eq!(told.expect("pay"), 0);
    let paid_by_inbox = Record::Pay {
        session_id: "s1".into(),
        up_to_ms: wakebridge::clock::now_ms(),
        how: Payment::Inbox,
    };
    store.record(paid_by_inbox).await.expect("pay");
    owe("s1").await.expect("owe");
    assert_eq!(hook_pays("s1"), 1, "the payment ended the claim");

    owe("s1").await.expect("owe");
    assert_eq!(store.claim_owed("s1", minute).await.expect("claim"), 1);
    assert_eq!(hook_pays("s1"), 0);
    let refused = Record::Unclaim {
        session_id: "s1".into(),
    };
    store.record(refused).await.expect("unclaim");
    assert_eq!(hook_pays("s1"), 1, "a refused wake gave the debt back");

    owe("s1").await.expect("owe");
    let short = Duration::from_secs(2);
    let claimed_at = Instant::now();
    assert_eq!(store.claim_owed("s1", short).await.expect("claim"), 1);
    assert_eq!(hook_pays("s1"), 0);
    std::thread::sleep(short.saturating_sub(claimed_at.elapsed()) + Duration::from_millis(20));
    assert_eq!(hook_pays("s1"), 1, "the claim lapsed");
}

#[tokio::test]
async fn owed_events_are_paid_once_up_to_the_wake_and_outlive_pruning() {
    let store = in_memory();
    let now = wakebridge::clock::now_ms();
    for at in [now - 25 * HOUR_MS, now - 2000, now - 1000] {
        store
            .record(Record::Delivery(owed("s1", at)))
            .await
            .expect("owe");
    }
    store
        .record(Record::Delivery(owed("s2", now)))
        .await
        .expect("owe");
    // Events older than the retention window are pruned, owed ones are not.
    assert_eq!(
        store
            .prune_older_than(now - 24 * HOUR_MS)
            .await
            .expect("prune"),
        0
    );
    let owed_s1 = store
        .session("s1")
        .expect("read")
        .expect("row")
        .owed
        .expect("owed");
    assert_eq!((owed_s1.events, owed_s1.since_ms), (3, now - 25 * HOUR_MS));

    // A typed wake pays what arrived up to it, not what came after.
    let pay = |up_to_ms| Record::Pay {
        session_id: "s1".into(),
        up_to_ms,
        how: Payment::Typed,
    };
    store.record(pay(now - 1500)).await.expect("pay");
    let row = store.session("s1").expect("read").expect("row");
    assert_eq!(row.owed.map(|o| o.events), Some(1));
    let paid = row.paid.expect("paid");
    assert_eq!(
        (
            paid.last_how,
            paid.last_events,
            paid.by_typing,
            paid.by_hook
        ),
        (Payment::Typed, 2, 1, 0)
    );

    // The hook's payment is committed only if its answer was handed over.
    let path = store.path().to_path_buf();
    assert_eq!(
        Store::pay_once(&path, "s1", Payment::Hook, |_| false).expect("pay"),
        0
    );
    assert_eq!(
        store
            .session("s1")
            .expect("read")
            .expect("row")
            .owed
            .map(|o| o.events),
        Some(1)
    );
    let mut told = 0;
    let paid = Store::pay_once(&path, "s1", Payment::Hook, |n| {
        told = n;
        true
    });
    assert_eq!((paid.expect("pay"), told), (1, 1));
    // Nothing is paid twice, and a session with nothing owed is not asked to deliver.
    assert_eq!(
        Store::pay_once(&path, "s1", Payment::Hook, |_| panic!("nothing owed")).expect("pay"),
        0
    );
    store.record(pay(now)).await.expect("pay nothing");
    let row = store.session("s1").expect("read").expect("row");
    assert_eq!(row.owed, None);
    let paid = row.paid.expect("paid");
    assert_eq!(
        (paid.last_how, paid.by_typing, paid.by_hook),
        (Payment::Hook, 1, 1)
    );
    assert_eq!(
        store
            .session("s2")
            .expect("read")
            .expect("row")
            .owed
            .map(|o| o.events),
        Some(1)
    );
    // Paid events are pruned with the rest.
    assert_eq!(
        store
            .prune_older_than(now - 24 * HOUR_MS)
            .await
            .expect("prune"),
        1
    );
}

#[tokio::test]
async fn session_seen_upserts_keep_known_fields() {
    let store = in_memory();
    store
        .record(Record::SessionSeen(seen("s1", 1_000)))
        .await
        .expect("first");
    store
        .record(Record::SessionSeen(SessionSeen {
            session_id: "s1".into(),
            cwd: None,
            transcript_path: None,
            pane: Some("zellij:main:terminal_2".into()),
            last_hook_event: Some("UserPromptSubmit".into()),
            seen_at_ms: 900,
            kept: false,
            agent: Default::default(),
        }))
        .await
        .expect("second");
    let row = store.session("s1").expect("read").expect("present");
    assert_eq!(row.cwd.as_deref(), Some("/work/project"), "kept");
    assert_eq!(
        row.pane.as_deref(),
        Some("zellij:main:terminal_2"),
        "updated"
    );
    assert_eq!(row.last_hook_event.as_deref(), Some("UserPromptSubmit"));
    assert_eq!(row.last_seen_ms, Some(1_000), "never moves backwards");
    assert_eq!(row.first_seen_ms, Some(1_000));
    assert!(store.known_session("s1").expect("known"));
    assert!(!store.known_session("s2").expect("unknown"));
    assert_eq!(store.session("s2").expect("read"), None);
}

#[tokio::test]
async fn sessions_join_hook_facts_last_delivery_wake_and_nudges() {
    let store = in_memory();
    store
        .record(Record::SessionSeen(seen("local", 10)))
        .await
        .expect("seen");
    for (at, action) in [(20, "tmux"), (40, "spool-busy"), (30, "spool-cooldown")] {
        store
            .record(Record::Delivery(delivery("local", action, at, None)))
            .await
            .expect("delivery");
    }
    store
        .record(Record::Delivery(delivery(
            "foreign",
            "spool-unmapped",
            50,
            None,
        )))
        .await
        .expect("foreign");
    for at_ms in [20, 15] {
        store
            .record(Record::Wake {
                session_id: "local".into(),
                at_ms,
            })
            .await
            .expect("wake");
    }
    store
        .record(Record::Nudge(NudgeState {
            session_id: "local".into(),
            unanswered: 1,
            last_nudge_ms: Some(60),
            acknowledged: false,
        }))
        .await
        .expect("nudge");
    let rows = store.sessions().expect("sessions");
    let ids: Vec<&str> = rows.iter().map(|r| r.session_id.as_str()).collect();
    assert_eq!(ids, ["foreign", "local"]);
    let foreign = &rows[0];
    assert!(foreign.last_seen_ms.is_none());
    assert_eq!(foreign.last_action.as_deref(), Some("spool-unmapped"));
    let local = &rows[1];
    assert!(local.last_seen_ms.is_some());
    assert_eq!(
        (local.last_delivery_ms, local.last_action.as_deref()),
        (Some(40), Some("spool-busy"))
    );
    assert_eq!(local.last_wake_ms, Some(20), "an older wake does not win");
    assert_eq!(local.nudge.as_ref().map(|n| n.unanswered), Some(1));
}

#[test]
fn record_blocking_works_without_a_runtime_and_on_a_runtime_blocking_thread() {
    let store = in_memory();
    store
        .record_blocking(Record::SessionSeen(seen("cli", 1)))
        .expect("blocking record");
    assert!(store.known_session("cli").expect("known"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let on_blocking_thread = store.clone();
    runtime
        .block_on(async {
            tokio::task::spawn_blocking(move || {
                on_blocking_thread.record_blocking(Record::SessionSeen(seen("x", 1)))
            })
            .await
        })
        .expect("join")
        .expect("blocking record from spawn_blocking");
    assert!(store.known_session("x").expect("known"));
}

/// Figures for the report: `cargo test --test it store:: -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement, prints figures"]
async fn measure_group_commit_with_16_callers() {
    const CALLERS: i64 = 16;
    const PER_CALLER: i64 = 2_000;
    let dir = {
        common::timeout::arm_test_timeout();
        tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir on disk")
    };
    let store = Store::open(&dir.path().join("bench.db")).expect("open");
    let started = Instant::now();
    let callers: Vec<_> = (0..CALLERS)
        .map(|c| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in 0..PER_CALLER {
                    let rec = delivery(&format!("s{c}"), "tmux", i, Some(&format!("{c}-{i}")));
                    store.record(Record::Delivery(rec)).await.expect("record");
                }
            })
        })
        .collect();
    for caller in callers {
        caller.await.expect("join");
    }
    let elapsed = started.elapsed();
    let stats = store.write_stats();
    let records = CALLERS * PER_CALLER;
    println!(
        "16 callers x {PER_CALLER}: {records} records in {elapsed:?} = {:.0} records/s; \
         {} commits, {:.1} records/commit (largest {}), {:?} per commit (BEGIN..COMMIT)",
        records as f64 / elapsed.as_secs_f64(),
        stats.commits,
        stats.jobs as f64 / stats.commits as f64,
        stats.largest_batch,
        stats.commit_time / u32::try_from(stats.commits).expect("fits"),
    );
    // Sequential single caller, for comparison: one commit per record.
    let before = store.write_stats();
    let started = Instant::now();
    for i in 0..PER_CALLER {
        store
            .record(Record::Delivery(delivery("solo", "tmux", i, None)))
            .await
            .expect("record");
    }
    let elapsed = started.elapsed();
    let after = store.write_stats();
    println!(
        "1 caller x {PER_CALLER}: {:.0} records/s, {:?} per commit, {:?} per acked record",
        PER_CALLER as f64 / elapsed.as_secs_f64(),
        (after.commit_time - before.commit_time)
            / u32::try_from(after.commits - before.commits).expect("fits"),
        elapsed / u32::try_from(PER_CALLER).expect("fits"),
    );
}

// ---------------------------------------------------------------------------------------------
// Spool pruning

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

fn write_aged(path: &Path, bytes: usize, age: Duration) {
    fs::write(path, vec![b'x'; bytes]).expect("write");
    File::options()
        .write(true)
        .open(path)
        .expect("open")
        .set_modified(SystemTime::now() - age)
        .expect("set mtime");
}

fn config(max_total_bytes: u64) -> PruneSettings {
    PruneSettings {
        max_total_bytes,
        ..wakebridge::config::defaults().prune
    }
}

/// A child process holding a flock(2); killed and reaped on drop.
struct LockHolder {
    _child: ChildGuard,
}

impl LockHolder {
    fn hold(lock: &Path) -> Self {
        // --no-fork: flock execs `sleep` itself, so killing the child really drops the lock
        // (a forked `sleep` would inherit the locked descriptor and outlive the kill).
        let child = Command::new("flock")
            .args(["--exclusive", "--no-fork"])
            .arg(lock)
            .args(["sleep", "60"])
            .spawn()
            .expect("spawn flock (util-linux)");
        let holder = LockHolder {
            _child: ChildGuard::new(child),
        };
        let started = Instant::now();
        loop {
            let probe = File::options()
                .append(true)
                .create(true)
                .open(lock)
                .expect("lock");
            match probe.try_lock() {
                Err(fs::TryLockError::WouldBlock) => return holder,
                Ok(()) => probe.unlock().expect("unlock"),
                Err(fs::TryLockError::Error(err)) => panic!("probe lock: {err}"),
            }
            assert!(started.elapsed() < SETTLE, "child never took the lock");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

#[test]
fn prune_keeps_young_files_under_the_cap() {
    let dir = common::tempdir();
    write_aged(&dir.path().join("s1.jsonl"), 100, DAY);
    write_aged(
        &dir.path().join("s2.jsonl.draining.1-2.0"),
        100,
        Duration::from_secs(60),
    );
    let report = prune::prune_once(dir.path(), &config(1000), SystemTime::now()).expect("round");
    assert!(report.removed.is_empty());
    assert!(dir.path().join("s1.jsonl").exists());
    assert!(dir.path().join("s2.jsonl.draining.1-2.0").exists());
}

#[test]
fn prune_never_touches_locks_markers_panes_or_subdirectories() {
    let dir = common::tempdir();
    let old = 30 * DAY;
    let others = [
        "s1.lock",
        "s1.busy",
        "panes.json",
        "panes.lock",
        "bridge.singleton.lock",
        "hook.abcd.lock",
        "notes.txt",
        "bad id.jsonl",
    ];
    for name in others {
        write_aged(&dir.path().join(name), 10, old);
    }
    fs::create_dir(dir.path().join("nested")).expect("subdir");
    write_aged(&dir.path().join("nested").join("s9.jsonl"), 10, old);
    write_aged(&dir.path().join("s1.jsonl"), 10, old);
    let report = prune::prune_once(dir.path(), &config(0), SystemTime::now()).expect("round");
    let removed: Vec<PathBuf> = report.removed.iter().map(|r| r.path.clone()).collect();
    assert_eq!(removed, [dir.path().join("s1.jsonl")]);
    assert_eq!(report.removed[0].size, 10);
    assert!(report.removed[0].age >= old);
    for name in others {
        assert!(dir.path().join(name).exists(), "{name} touched");
    }
    assert!(
        dir.path().join("nested").join("s9.jsonl").exists(),
        "recursed"
    );
}

#[test]
fn prune_cap_removes_oldest_live_spools_first() {
    let dir = common::tempdir();
    write_aged(
        &dir.path().join("oldest.jsonl"),
        400,
        Duration::from_secs(3000),
    );
    write_aged(
        &dir.path().join("middle.jsonl"),
        400,
        Duration::from_secs(2000),
    );
    write_aged(
        &dir.path().join("newest.jsonl"),
        400,
        Duration::from_secs(1000),
    );
    let report = prune::prune_once(dir.path(), &config(500), SystemTime::now()).expect("round");
    let removed: Vec<PathBuf> = report.removed.iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        removed,
        [
            dir.path().join("oldest.jsonl"),
            dir.path().join("middle.jsonl")
        ]
    );
    assert!(dir.path().join("newest.jsonl").exists());
}

#[test]
fn prune_removes_stale_claims_but_never_fresh_ones_for_the_cap() {
    let dir = common::tempdir();
    let stale = dir.path().join("s1.jsonl.draining.77-1.0");
    let fresh = dir.path().join("s2.jsonl.draining.88-2.0");
    write_aged(&stale, 10, 8 * DAY);
    write_aged(&fresh, 1000, Duration::from_secs(60));
    let report = prune::prune_once(dir.path(), &config(0), SystemTime::now()).expect("round");
    assert!(!stale.exists());
    assert!(
        fresh.exists(),
        "a drainer's claim is not removed for the cap"
    );
    assert_eq!(report.removed.len(), 1);
}

#[test]
fn prune_skips_a_spool_whose_lock_another_process_holds() {
    let dir = common::tempdir();
    let spool = dir.path().join("s1.jsonl");
    write_aged(&spool, 10, 30 * DAY);
    let holder = LockHolder::hold(&dir.path().join("s1.lock"));
    let report = prune::prune_once(dir.path(), &config(0), SystemTime::now()).expect("round");
    assert!(spool.exists(), "removed under someone else's lock");
    assert_eq!(report.skipped_locked, std::slice::from_ref(&spool));
    drop(holder);
    let report = prune::prune_once(dir.path(), &config(0), SystemTime::now()).expect("round");
    assert_eq!(report.removed.len(), 1);
    assert!(!spool.exists());
}

#[test]
fn prune_ignores_symlinked_spool_files() {
    let dir = common::tempdir();
    let outside = common::tempdir();
    let target = outside.path().join("precious.jsonl");
    write_aged(&target, 10, 30 * DAY);
    let link = dir.path().join("s1.jsonl");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let report = prune::prune_once(dir.path(), &config(0), SystemTime::now()).expect("round");
    assert!(report.removed.is_empty());
    assert!(target.exists());
    assert!(
        fs::symlink_metadata(&link).is_ok(),
        "link itself left alone"
    );
}

#[test]
fn prune_refuses_to_lock_through_a_symlinked_lock_file() {
    let dir = common::tempdir();
    let outside = common::tempdir();
    let spool = dir.path().join("s1.jsonl");
    write_aged(&spool, 10, 30 * DAY);
    let elsewhere = outside.path().join("not-a-lock");
    std::os::unix::fs::symlink(&elsewhere, dir.path().join("s1.lock")).expect("symlink");
    let report = prune::prune_once(dir.path(), &config(0), SystemTime::now()).expect("round");
    assert!(spool.exists());
    assert_eq!(report.failures.len(), 1);
    assert!(matches!(report.failures[0], prune::PruneError::Lock { .. }));
    assert!(!elsewhere.exists(), "the symlink was followed");
}

#[test]
fn prune_of_a_missing_wake_dir_is_a_quiet_no_op() {
    let dir = common::tempdir();
    let report = prune::prune_once(&dir.path().join("absent"), &config(0), SystemTime::now())
        .expect("round");
    assert!(report.removed.is_empty());
}

#[tokio::test(start_paused = true)]
async fn prune_task_runs_every_interval_until_shutdown() {
    let dir = common::tempdir();
    let first = dir.path().join("s1.jsonl");
    write_aged(&first, 10, 30 * DAY);
    let config = config(u64::MAX);
    let interval = config.interval;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(prune::run(
        dir.path().to_path_buf(),
        config,
        shutdown.clone(),
    ));
    // The first round runs at once.
    let started = tokio::time::Instant::now();
    while first.exists() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        started.elapsed() < interval,
        "first round waited for the interval"
    );
    let second = dir.path().join("s2.jsonl");
    write_aged(&second, 10, 30 * DAY);
    tokio::time::sleep(interval + Duration::from_secs(1)).await;
    while second.exists() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(1), task)
        .await
        .expect("stops on shutdown")
        .expect("join");
}

#[tokio::test]
async fn the_warm_up_reads_every_delivery_of_the_window_oldest_first() {
    let store = in_memory();
    let now = wakebridge::clock::now_ms();
    for i in 0..10 {
        let identity = format!("id-{i}");
        store
            .record(Record::Delivery(delivery(
                "s1",
                "spool",
                now - 1000 + i,
                Some(&identity),
            )))
            .await
            .expect("record");
    }
    // A redelivery of id-3 answered later: its newest row comes last, so it is the one kept.
    store
        .record(Record::Delivery(delivery(
            "s1",
            "spool-busy",
            now,
            Some("id-3"),
        )))
        .await
        .expect("record");
    // Before the window: not read.
    store
        .record(Record::Delivery(delivery(
            "s1",
            "tmux",
            now - 2 * HOUR_MS,
            Some("too-old"),
        )))
        .await
        .expect("record");
    let ids = identities_since(&store, now - HOUR_MS);
    let mut expected: Vec<(String, String)> = (0..10)
        .map(|i| (format!("id-{i}"), "spool".to_string()))
        .collect();
    expected.push(("id-3".into(), "spool-busy".into()));
    assert_eq!(ids, expected);
}

#[tokio::test]
async fn a_session_whose_deliveries_are_all_pruned_is_forgotten() {
    let store = in_memory();
    let now = wakebridge::clock::now_ms();
    store
        .record(Record::Delivery(delivery(
            "gone",
            "spool",
            now - 30 * HOUR_MS,
            None,
        )))
        .await
        .expect("old");
    store
        .record(Record::Delivery(delivery(
            "kept",
            "tmux",
            now - 30 * HOUR_MS,
            None,
        )))
        .await
        .expect("old");
    store
        .record(Record::Delivery(delivery("kept", "spool-busy", now, None)))
        .await
        .expect("recent");
    let listed = |store: &Store| -> Vec<String> {
        store
            .sessions()
            .expect("sessions")
            .into_iter()
            .map(|r| r.session_id)
            .collect()
    };
    assert_eq!(listed(&store), ["gone", "kept"]);
    assert_eq!(
        store
            .prune_older_than(now - 24 * HOUR_MS)
            .await
            .expect("prune"),
        2
    );
    assert_eq!(listed(&store), ["kept"]);
    let kept = store.session("kept").expect("read").expect("listed");
    assert_eq!(kept.last_action.as_deref(), Some("spool-busy"));
}

#[tokio::test]
async fn sessions_gone_past_the_cutoff_are_forgotten_unless_still_mapped() {
    let store = in_memory();
    let old = 1_000;
    let recent = 50 * HOUR_MS;
    let nudge = |sid: &str, at: Option<i64>| {
        Record::Nudge(NudgeState {
            session_id: sid.into(),
            unanswered: 5,
            last_nudge_ms: at,
            acknowledged: true,
        })
    };
    store
        .record_all(vec![
            // Gone: every trace is old.
            Record::SessionSeen(seen("gone", old)),
            Record::Wake {
                session_id: "gone".into(),
                at_ms: old,
            },
            nudge("gone", Some(old)),
            // Seen long ago, but nudged recently: still around.
            Record::SessionSeen(seen("nudged", old)),
            nudge("nudged", Some(recent)),
            // Old, but its pane is still mapped.
            Record::SessionSeen(seen("mapped", old)),
            Record::Wake {
                session_id: "only-a-wake".into(),
                at_ms: old,
            },
            Record::SessionSeen(seen("active", recent)),
        ])
        .await
        .expect("record");
    let forgotten = store
        .forget_sessions_before(10 * HOUR_MS, vec!["mapped".into()])
        .await
        .expect("forget");
    assert_eq!(forgotten, 2, "gone and only-a-wake");
    let left: Vec<String> = store
        .sessions()
        .expect("sessions")
        .into_iter()
        .map(|s| s.session_id)
        .collect();
    assert_eq!(left, ["active", "mapped", "nudged"]);
    assert!(!store.last_wakes().expect("wakes").contains_key("gone"));
}

#[test]
fn a_spool_round_is_pending_until_synced_and_a_refused_share_can_be_taken_back() {
    use wakebridge::store::{PendingBytes, SpoolRound};
    let store = in_memory();
    let share = |sid: &str, bytes: &str| PendingBytes {
        session_id: sid.into(),
        inode: 7,
        offset: 100,
        bytes: bytes.as_bytes().to_vec(),
    };
    let round = SpoolRound {
        wake_dir: "/wake".into(),
        sessions: vec![
            (
                share("a", "{\"a\": 1}\n{\"a\": 2}\n"),
                vec![
                    delivery("a", "spool", 1, Some("id-a1")),
                    delivery("a", "spool", 2, Some("id-a2")),
                ],
            ),
            (
                share("b", "{\"b\": 1}\n"),
                vec![delivery("b", "spool", 3, Some("id-b1"))],
            ),
        ],
    };
    let ids = store.commit_round(round).expect("commit");
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0].deliveries.len(), 2);
    assert_eq!(ids[0].pending, ids[1].pending, "one pending row per round");
    let pending = store.pending_spool("/wake").expect("read");
    let shares: Vec<(String, String)> = pending
        .iter()
        .map(|(_, p)| {
            (
                p.session_id.clone(),
                String::from_utf8(p.bytes.clone()).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        shares,
        [
            ("a".into(), "{\"a\": 1}\n{\"a\": 2}\n".into()),
            ("b".into(), "{\"b\": 1}\n".into())
        ]
    );
    assert!(store.pending_spool("/elsewhere").expect("read").is_empty());
    // b's bytes could not be written: its share and its deliveries go, a's stay.
    store.forget_share("b", ids[1].clone()).expect("forget");
    let pending = store.pending_spool("/wake").expect("read");
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].1.session_id, "a");
    let identities: Vec<String> = identities_since(&store, 0)
        .into_iter()
        .map(|(identity, _)| identity)
        .collect();
    assert!(
        identities.contains(&"id-a1".to_string()) && !identities.contains(&"id-b1".to_string())
    );
    assert_eq!(
        store.spool_synced("/wake", ids[0].pending).expect("synced"),
        1
    );
    assert!(store.pending_spool("/wake").expect("read").is_empty());
    assert_eq!(
        store
            .session("a")
            .expect("a")
            .and_then(|s| s.last_delivery_ms),
        Some(2),
        "the latest delivery of a session is kept without a trigger"
    );
}

/// Issue 28, part 2: the hook's notice (`resets 9:16am`, to the minute) recorded first, then the
/// transcript's record of the same limit with its exact `resetsAt` (09:16:22): the exact reset
/// wins, and a later read of the minute does not move it back. Only the reset changes.
#[tokio::test]
async fn the_most_exact_reset_of_a_limit_wins_whichever_came_first() {
    let store = in_memory();
    let minute = 1_796_000_160_000; // 9:16:00
    let exact = minute + 22_000; // 9:16:22
    let seen = |how: LimitSource, resets_at_ms: i64, resets_exact: bool, at_ms: i64| {
        Record::Limited(LimitSeen {
            session_id: "lim".into(),
            kind: "5-hour limit".into(),
            resets_text: Some("9:16am".into()),
            resets_at_ms: Some(resets_at_ms),
            resets_exact,
            how,
            at_ms,
        })
    };
    let limit = || store.limit("lim").expect("read").expect("a limit");
    for record in [
        seen(LimitSource::Hook, minute, false, 1_000),
        Record::ResumeTried {
            session_id: "lim".into(),
            at_ms: 1_500,
        },
        seen(LimitSource::Transcript, exact, true, 2_000),
    ] {
        store.record(record).await.expect("record");
    }
    let kept = limit();
    assert_eq!(kept.resets_at_ms, Some(exact), "{kept:?}");
    assert_eq!(
        (kept.since_ms, kept.tries),
        (1_000, 1),
        "the same limit: {kept:?}"
    );
    // The minute read again (the screen, the hook): the exact reset stays.
    store
        .record(seen(LimitSource::Screen, minute, false, 3_000))
        .await
        .expect("record");
    assert_eq!(limit().resets_at_ms, Some(exact));
    // And the other order: the exact reset first is never replaced by the minute.
    store
        .record(Record::LimitLifted {
            session_id: "lim".into(),
        })
        .await
        .expect("record");
    store
        .record(seen(LimitSource::Transcript, exact, true, 4_000))
        .await
        .expect("record");
    store
        .record(seen(LimitSource::Hook, minute, false, 5_000))
        .await
        .expect("record");
    assert_eq!(limit().resets_at_ms, Some(exact));
}

#[tokio::test]
async fn a_usage_limit_keeps_its_reset_and_tries_until_a_new_notice_and_goes_when_lifted() {
    let store = in_memory();
    let seen = |text: &str, resets_at_ms: i64, how: LimitSource, at_ms: i64| {
        Record::Limited(LimitSeen {
            session_id: "lim".into(),
            kind: "session limit".into(),
            resets_text: Some(text.into()),
            resets_at_ms: Some(resets_at_ms),
            resets_exact: false,
            how,
            at_ms,
        })
    };
    let limit = || store.limit("lim").expect("read").expect("a limit");
    store
        .record(seen("3pm", 5_000, LimitSource::Hook, 1_000))
        .await
        .expect("record");
    assert_eq!(limit().resets_at_ms, Some(5_000));
    assert_eq!(limit().how, LimitSource::Hook);
    // The same notice read again later (a day's rollover would move a bare "3pm"): kept.
    store
        .record(seen("3pm", 90_000, LimitSource::Screen, 2_000))
        .await
        .expect("record");
    assert_eq!(limit().resets_at_ms, Some(5_000));
    assert_eq!(limit().since_ms, 1_000);
    store
        .record(Record::ResumeTried {
            session_id: "lim".into(),
            at_ms: 6_000,
        })
        .await
        .expect("record");
    // A new notice (the limit met again): the new reset, the tries kept.
    store
        .record(seen("8pm", 20_000, LimitSource::Screen, 7_000))
        .await
        .expect("record");
    let now = limit();
    assert_eq!(
        (now.resets_at_ms, now.resets_text.as_deref(), now.tries),
        (Some(20_000), Some("8pm"), 1)
    );
    assert_eq!(now.last_try_ms, Some(6_000));
    store
        .record(Record::ResumeGaveUp {
            session_id: "lim".into(),
        })
        .await
        .expect("record");
    assert!(limit().gave_up);
    let row = store.session("lim").expect("read").expect("row");
    assert_eq!(row.limit, Some(limit()));
    // The same notice again keeps it given up; a new reset starts a new series of tries.
    store
        .record(seen("8pm", 99_000, LimitSource::Screen, 8_000))
        .await
        .expect("record");
    assert!(limit().gave_up && limit().tries == 1);
    store
        .record(seen("in 5h", 40_000, LimitSource::Hook, 9_000))
        .await
        .expect("record");
    let fresh = limit();
    assert_eq!(
        (
            fresh.gave_up,
            fresh.tries,
            fresh.last_try_ms,
            fresh.since_ms
        ),
        (false, 0, None, 9_000)
    );
    assert_eq!(fresh.resets_at_ms, Some(40_000));
    store
        .record(Record::LimitLifted {
            session_id: "lim".into(),
        })
        .await
        .expect("record");
    assert_eq!(store.limit("lim").expect("read"), None);

    // A limit of a session gone past the cutoff is forgotten with it.
    store
        .record(seen("3pm", 5_000, LimitSource::Hook, 1_000))
        .await
        .expect("record");
    assert_eq!(
        store
            .forget_sessions_before(2_000, Vec::new())
            .await
            .expect("forget"),
        1
    );
    assert_eq!(store.limit("lim").expect("read"), None);
}

#[tokio::test]
async fn a_rename_moves_what_is_owed_follows_chains_and_outlives_the_old_ids_traces() {
    let store = in_memory();
    let owed = Delivery {
        owed: true,
        ..delivery("old", "spool-busy", 1_000, Some("e1"))
    };
    store
        .record_all(vec![
            Record::SessionSeen(seen("old", 1_000)),
            Record::Delivery(owed),
            Record::RewindAsked {
                session_id: "old".into(),
                why: RewindWhy::Asked,
                at_ms: 1_100,
            },
            // A second ask while one waits changes nothing.
            Record::RewindAsked {
                session_id: "old".into(),
                why: RewindWhy::Auto,
                at_ms: 1_200,
            },
        ])
        .await
        .expect("record");
    store
        .record_all(vec![
            Record::Renamed(Alias {
                old_id: "old".into(),
                new_id: "mid".into(),
                pane: "tmux pane %3".into(),
                at_ms: 2_000,
            }),
            Record::Renamed(Alias {
                old_id: "mid".into(),
                new_id: "new".into(),
                pane: "tmux pane %3".into(),
                at_ms: 3_000,
            }),
            Record::SessionSeen(seen("new", 3_000)),
        ])
        .await
        .expect("record");
    assert_eq!(
        store.successor("old").expect("read"),
        Some(("new".into(), "tmux pane %3".into()))
    );
    assert_eq!(store.successor("new").expect("read"), None);
    // What the old id was owed went to the id after it (then stayed: the second rename moved
    // it on too).
    assert_eq!(
        store
            .session("new")
            .expect("read")
            .expect("row")
            .owed
            .map(|o| o.events),
        Some(1)
    );
    let rewinds = store.rewinds().expect("read");
    let facts = rewinds.facts("new");
    assert_eq!(facts.formerly, ["mid", "old"]);
    let waiting = facts.pending.expect("the ask from before the renames");
    assert_eq!(
        (waiting.session_id.as_str(), waiting.why),
        ("old", RewindWhy::Asked)
    );
    assert!(rewinds.renamed("old") && rewinds.renamed("mid") && !rewinds.renamed("new"));
    store
        .record(Record::RewindEnded {
            session_id: "old".into(),
            outcome: RewindOutcome::Done,
            new_id: Some("new".into()),
            detail: None,
            at_ms: 3_500,
        })
        .await
        .expect("record");
    let facts = store.rewinds().expect("read").facts("new");
    assert_eq!((facts.performed, facts.last_performed_ms), (1, Some(3_500)));
    assert!(facts.pending.is_none());
    let counts = store.rewind_counts().expect("read");
    assert_eq!(counts.get(&Some(RewindOutcome::Done)), Some(&1));

    // Long after: the old ids' traces are old, but "new" is still mapped, so the renames that
    // reach it (and their rewinds) stay; once "new" is forgotten, they go with it.
    store
        .forget_sessions_before(100_000, vec!["new".into()])
        .await
        .expect("forget");
    assert_eq!(
        store.successor("old").expect("read"),
        Some(("new".into(), "tmux pane %3".into()))
    );
    assert_eq!(store.rewinds().expect("read").facts("new").performed, 1);
    store
        .forget_sessions_before(100_000, Vec::new())
        .await
        .expect("forget");
    assert_eq!(store.successor("old").expect("read"), None);
    assert_eq!(store.rewinds().expect("read"), Default::default());
}

/// `wakebridge forget`: one session goes whatever its age, with the ids it had before a
/// `/clear` and its latest delivery (so `/sessions` no longer lists it), and nobody else.
#[tokio::test]
async fn forgetting_one_session_takes_its_former_ids_and_nothing_else() {
    let dir = common::tempdir();
    let store = Store::open(&dir.path().join("ledger.sqlite3")).expect("open");
    let now = wakebridge::clock::now_ms();
    let mut owed = delivery("old", "spool-busy", now, Some("id-owed"));
    owed.owed = true;
    store
        .record_all(vec![
            Record::SessionSeen(seen("old", now)),
            Record::Delivery(owed),
            Record::Renamed(Alias {
                old_id: "old".into(),
                new_id: "new".into(),
                pane: "tmux pane %3".into(),
                at_ms: now,
            }),
            Record::SessionSeen(seen("new", now)),
            Record::Delivery(delivery("new", "tmux", now, Some("id-new"))),
            Record::SessionSeen(seen("other", now)),
        ])
        .await
        .expect("record");
    let ids = |store: &Store| -> Vec<String> {
        store
            .sessions()
            .expect("read")
            .into_iter()
            .map(|s| s.session_id)
            .collect()
    };
    assert_eq!(ids(&store), ["new", "old", "other"]);
    assert_eq!(store.forget_session("nobody").await.expect("forget"), 0);
    assert_eq!(store.forget_session("new").await.expect("forget"), 2);
    assert_eq!(ids(&store), ["other"], "fresh traces do not keep it");
    assert_eq!(store.successor("old").expect("read"), None);
    assert_eq!(store.forget_session("new").await.expect("forget"), 0);
    // Its deliveries stay for the identity window: a redelivered event is still known.
    assert_eq!(
        count_rows(&dir.path().join("ledger.sqlite3"), "deliveries"),
        2
    );
}

#[tokio::test]
async fn an_inbox_send_is_heard_whichever_process_writes_first_and_a_later_prompt_keeps_it() {
    let store = in_memory();
    let sent = |digest: &str, at_ms| Record::InboxSent {
        session_id: "s".into(),
        digest: digest.into(),
        at_ms,
    };
    let heard = |digest: &str, at_ms| Record::InboxHeard {
        session_id: "s".into(),
        digest: digest.into(),
        at_ms,
    };
    let row = |store: &Store| store.inbox("s").unwrap().unwrap();
    // The session's hook reported the prompt before the daemon recorded the send it began.
    store.record(heard("d1", 105)).await.unwrap();
    store.record(sent("d1", 100)).await.unwrap();
    assert_eq!(row(&store).heard_ms, Some(105));
    // A person's prompt afterwards: still heard, and the session answered.
    store.record(heard("other", 200)).await.unwrap();
    assert_eq!(
        (row(&store).heard_ms, row(&store).unanswered_since()),
        (Some(105), None)
    );
    // A new send: not heard until its own text comes back; a stale report of it is not heard.
    store.record(sent("d2", 300)).await.unwrap();
    assert_eq!(row(&store).unanswered_since(), Some(300));
    store.record(heard("d2", 250)).await.unwrap();
    assert_eq!(row(&store).heard_ms, None);
    store.record(heard("d2", 310)).await.unwrap();
    assert_eq!(row(&store).heard_ms, Some(310));
}

/// What `[nudger] keep = "agents"` reads of a session: whether the bus or a person's `wakebridge
/// wake` told it something (a context warning is no telling), and whether its start opted it in
/// (`WAKEBRIDGE=keep`), which a later hook without the variable does not take back.
#[tokio::test]
async fn a_session_told_by_the_bus_or_a_person_or_opted_in_is_marked_so() {
    let store = in_memory();
    for sid in ["told", "woken", "warned", "late", "opted"] {
        store
            .record(Record::SessionSeen(seen(sid, 1)))
            .await
            .unwrap();
    }
    let told = |sid: &str, source| Delivery {
        source,
        ..delivery(sid, "inbox", 3, None)
    };
    let hook = told("told", DeliverySource::Hook);
    store.record(Record::Delivery(hook)).await.unwrap();
    let woken = told("woken", DeliverySource::Wake);
    store.record(Record::Delivery(woken)).await.unwrap();
    let warned = told("warned", DeliverySource::Context);
    store.record(Record::Delivery(warned)).await.unwrap();
    // "late": told by a bus row recorded after a newer warning (clocks differ).
    let newer = Delivery {
        at_ms: 5,
        ..told("late", DeliverySource::Context)
    };
    store.record(Record::Delivery(newer)).await.unwrap();
    store
        .record(Record::Delivery(told("late", DeliverySource::Hook)))
        .await
        .unwrap();
    let late = store.session("late").unwrap().unwrap();
    assert_eq!(late.last_delivery_ms, Some(5), "the newer stays the latest");
    let opted = SessionSeen {
        kept: true,
        ..seen("opted", 2)
    };
    store.record(Record::SessionSeen(opted)).await.unwrap();
    store
        .record(Record::SessionSeen(seen("opted", 3)))
        .await
        .unwrap();
    let row = |sid: &str| store.session(sid).unwrap().unwrap();
    let marked = |sid: &str| (row(sid).told_ms.is_some(), row(sid).kept);
    assert_eq!(marked("told"), (true, false));
    assert_eq!(marked("woken"), (true, false));
    assert_eq!(marked("warned"), (false, false));
    assert_eq!(marked("late"), (true, false));
    assert_eq!(marked("opted"), (false, true), "kept once opted in");
    // Through a `/clear`, the new id is the same agent: kept.
    for (old_id, new_id) in [("told", "told-after-clear"), ("opted", "opted-after-clear")] {
        store
            .record(Record::SessionSeen(seen(new_id, 9)))
            .await
            .unwrap();
        let renamed = Alias {
            old_id: old_id.into(),
            new_id: new_id.into(),
            pane: "%3".into(),
            at_ms: 9,
        };
        store.record(Record::Renamed(renamed)).await.unwrap();
        assert_eq!(marked(new_id), (false, true), "{new_id}");
    }
}

#[tokio::test]
async fn a_pause_follows_its_session_through_a_clear_and_an_all_pause_covers_everyone() {
    let store = in_memory();
    let paused = |store: &Store, sid: &str| store.pause(sid).unwrap();
    store
        .record(Record::Paused {
            session_id: "old".into(),
            since_ms: 1,
            until_ms: None,
        })
        .await
        .unwrap();
    store
        .record(Record::Renamed(Alias {
            old_id: "old".into(),
            new_id: "new".into(),
            pane: "%1".into(),
            at_ms: 2,
        }))
        .await
        .unwrap();
    assert!(paused(&store, "new").is_some_and(|p| !p.all));
    assert_eq!(paused(&store, "other"), None);
    store
        .record(Record::Paused {
            session_id: wakebridge::store::ALL_SESSIONS.into(),
            since_ms: 3,
            until_ms: Some(1),
        })
        .await
        .unwrap();
    assert_eq!(
        paused(&store, "other"),
        None,
        "a pause past its end is over"
    );
    store
        .record(Record::Paused {
            session_id: wakebridge::store::ALL_SESSIONS.into(),
            since_ms: 3,
            until_ms: None,
        })
        .await
        .unwrap();
    assert!(paused(&store, "other").is_some_and(|p| p.all));
    assert!(
        paused(&store, "new").is_some_and(|p| !p.all),
        "its own first"
    );
    store
        .record(Record::Unpaused {
            session_id: wakebridge::store::ALL_SESSIONS.into(),
        })
        .await
        .unwrap();
    assert_eq!(paused(&store, "new"), None, "--all lifts every pause");
}
