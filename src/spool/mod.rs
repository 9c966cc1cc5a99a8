//! The durable per-session spool: `<wake_dir>/<sid>.jsonl`, one JSON line per event, appended
//! under `flock(2)` on `<sid>.lock` as the Python bridge's drain expects, durable before the bus
//! is answered; the ledger's round record is the write-ahead record (docs/design.md). `files`:
//! the file protocol, `writer`: the threads, `recover`: after a crash, `prune`: age and size.

mod files;
pub mod prune;
mod recover;
mod writer;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::oneshot;

use crate::deadline::Deadline;
use crate::store::{Delivery, PendingBytes, Store, StoreError};
use crate::wire::session_id::SessionId;
pub use files::spool_path;
pub use writer::DeliveryId;
use writer::{Pending, Shared, Writer};

/// How long an append may wait for a drainer's `<sid>.lock`; with the injection budget it must
/// stay well under the bus's 5 s timeout.
pub const LOCK_BUDGET: Duration = Duration::from_secs(2);

/// Why an append failed; `kind` (kebab-case) is the metrics' and the ledger's `error_kind`.
#[derive(
    Debug, Clone, thiserror::Error, PartialEq, Eq, strum::IntoStaticStr, strum::VariantNames,
)]
#[strum(serialize_all = "kebab-case")]
pub enum SpoolError {
    #[error("spool file {0} is a symlink; remove it so the bridge can append")]
    Symlink(PathBuf),
    #[error("Could not lock spool for {0} within 2s (stuck drainer?)")]
    LockTimeout(String),
    /// An I/O failure because the disk is full (`io::ErrorKind::StorageFull`).
    #[error("spool I/O for {sid} failed at {path}: {message}")]
    NoSpace {
        sid: String,
        path: PathBuf,
        message: String,
    },
    #[error("spool I/O for {sid} failed at {path}: {message}")]
    Io {
        sid: String,
        path: PathBuf,
        kind: io::ErrorKind,
        message: String,
    },
    #[error("the spool writer for {0} stopped before answering")]
    WriterGone(String),
}

impl SpoolError {
    pub const KINDS: &[&str] = <Self as strum::VariantNames>::VARIANTS;

    pub fn kind(&self) -> &'static str {
        self.into()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot read the spool's pending rounds from the ledger: {0}")]
    Ledger(#[from] StoreError),
    #[error("cannot restore spool lines in {}: {source}", wake_dir.display())]
    Recovery {
        wake_dir: PathBuf,
        source: SpoolError,
    },
    #[error(
        "cannot restore spool lines for session {sid}: {} stayed locked for {}s (a stuck drainer?); stop whatever holds it and start wakebridge again",
        lock.display(),
        waited.as_secs()
    )]
    RecoveryLocked {
        sid: String,
        lock: PathBuf,
        waited: Duration,
    },
    #[error("cannot start the spool writer thread: {0}")]
    Thread(io::Error),
}

impl OpenError {
    /// A drainer holding a lock may let go (exit 1); anything else needs a human.
    pub fn restart_may_help(&self) -> bool {
        matches!(self, OpenError::RecoveryLocked { .. })
    }
}

#[derive(Debug, Clone, Copy)]
pub struct SpoolOptions {
    pub lock_budget: Duration,
    /// How often files are fsynced and their pending bytes dropped (`[spool] sync_interval`).
    pub checkpoint_every: Duration,
}

impl Default for SpoolOptions {
    fn default() -> Self {
        Self {
            lock_budget: LOCK_BUDGET,
            checkpoint_every: crate::config::defaults().spool.sync_interval,
        }
    }
}

/// Appends spool lines for every session of one wake dir.
pub struct Spool {
    wake_dir: PathBuf,
    lock_budget: Duration,
    shared: Arc<Shared>,
    writer: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl Spool {
    /// Opens the spool of the existing `wake_dir`: restores what a crash took, starts the writer.
    pub fn open(wake_dir: PathBuf, store: Store, options: SpoolOptions) -> Result<Self, OpenError> {
        let wake_key = wake_dir.to_string_lossy().into_owned();
        forget_old_journal(&wake_dir);
        let pending = store.pending_spool(&wake_key)?;
        if let Some(&(last, _)) = pending.last() {
            let entries: Vec<PendingBytes> = pending.into_iter().map(|(_, e)| e).collect();
            restore(&wake_dir, &entries)?;
            store.spool_synced(&wake_key, last)?;
        }
        let shared = Arc::new(Shared::new(options.checkpoint_every));
        let checkpointer = {
            let (shared, store, wake_key) = (shared.clone(), store.clone(), wake_key.clone());
            std::thread::Builder::new()
                .name("wakebridge-spool-sync".into())
                .spawn(move || writer::checkpointer(shared, store, wake_key))
                .map_err(OpenError::Thread)?
        };
        let writer = Writer::new(shared.clone(), wake_dir.clone(), wake_key, store);
        let writer = std::thread::Builder::new()
            .name("wakebridge-spool".into())
            .spawn(move || writer.run(checkpointer))
            .map_err(OpenError::Thread)?;
        Ok(Self {
            wake_dir,
            lock_budget: options.lock_budget,
            shared,
            writer: std::sync::Mutex::new(Some(writer)),
        })
    }

    pub fn wake_dir(&self) -> &Path {
        &self.wake_dir
    }

    /// Appends `line` and records `delivery`; returns the row id once both are durable.
    pub async fn append(
        &self,
        sid: &SessionId,
        line: String,
        delivery: Delivery,
    ) -> Result<DeliveryId, SpoolError> {
        let (done, answer) = oneshot::channel();
        let pending = Pending {
            sid: sid.to_string(),
            line,
            delivery,
            deadline: Deadline::after(self.lock_budget),
            done,
        };
        if !self.shared.push(pending) {
            return Err(SpoolError::WriterGone(sid.to_string()));
        }
        answer
            .await
            .map_err(|_| SpoolError::WriterGone(sid.to_string()))?
    }

    /// Answers everything queued, syncs every file, clears the pending rows; later appends fail.
    pub fn close(&self) {
        self.shared.close();
        let writer = crate::lock(&self.writer).take();
        if let Some(writer) = writer
            && writer.join().is_err()
        {
            tracing::error!("the spool writer thread panicked");
        }
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        self.close();
    }
}

/// Removes wakebridge 0.1's write-ahead ring (`.wakebridge-journal`), which the ledger replaced.
fn forget_old_journal(wake_dir: &Path) {
    let old = wake_dir.join(".wakebridge-journal");
    if std::fs::remove_file(&old).is_ok() {
        tracing::info!(path = %old.display(), "removed the old spool journal; the ledger records spool rounds now");
    }
}

/// Puts back what a crash took from the session files (before anything is appended).
fn restore(wake_dir: &Path, entries: &[PendingBytes]) -> Result<(), OpenError> {
    let replayed = recover::replay(wake_dir, entries, recover::LOCK_PATIENCE);
    let restored = replayed.map_err(|source| match source {
        SpoolError::LockTimeout(sid) => OpenError::RecoveryLocked {
            lock: wake_dir.join(format!("{sid}.lock")),
            sid,
            waited: recover::LOCK_PATIENCE,
        },
        source => OpenError::Recovery {
            wake_dir: wake_dir.to_path_buf(),
            source,
        },
    })?;
    if restored.bytes > 0 {
        tracing::warn!(
            records = restored.records,
            bytes = restored.bytes,
            "restored spool lines a crash had cut from the session files"
        );
    }
    if restored.gone > 0 {
        tracing::info!(
            records = restored.gone,
            "skipped pending spool rounds whose file a drainer had already taken and deleted"
        );
    }
    if restored.foreign > 0 {
        tracing::warn!(
            records = restored.foreign,
            "skipped pending spool rounds whose file now holds other lines (its inode number was reused)"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_kind_is_listed() {
        let io = |kind| super::files::io_error("s", "p".as_ref(), io::Error::from(kind));
        let all = [
            SpoolError::Symlink("p".into()),
            SpoolError::LockTimeout("s".into()),
            io(io::ErrorKind::StorageFull),
            io(io::ErrorKind::Other),
            SpoolError::WriterGone("s".into()),
        ];
        let kinds: Vec<&str> = all.iter().map(SpoolError::kind).collect();
        assert_eq!(kinds, SpoolError::KINDS);
    }

    use super::*;
    use std::fs::File;
    use std::os::unix::fs::MetadataExt;

    fn spool_in(dir: &Path) -> Spool {
        crate::wakedir::ensure_wake_dir(dir).expect("wake dir");
        Spool::open(dir.to_path_buf(), ledger(), SpoolOptions::default()).expect("open spool")
    }

    fn ledger() -> Store {
        Store::open_in_memory().expect("ledger")
    }

    /// The delivery row a line is recorded with.
    fn sid(id: &str) -> SessionId {
        SessionId::parse(id).expect("a valid session id")
    }

    fn row(sid: &str) -> Delivery {
        Delivery {
            at_ms: crate::clock::now_ms(),
            source: crate::store::DeliverySource::Hook,
            identity: None,
            event_id: None,
            sender: "test".into(),
            target_session: sid.into(),
            action: "spool".into(),
            spool_us: None,
            inject_us: None,
            error_kind: None,
            owed: false,
        }
    }

    #[tokio::test]
    async fn appends_lines_with_private_modes() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let spool = spool_in(tmp.path());
        spool
            .append(&sid("t"), "{\"a\": 1}\n".into(), row("t"))
            .await
            .expect("append");
        spool
            .append(&sid("t"), "{\"a\": 2}\n".into(), row("t"))
            .await
            .expect("append");
        let text = std::fs::read_to_string(tmp.path().join("t.jsonl")).expect("read");
        assert_eq!(text, "{\"a\": 1}\n{\"a\": 2}\n");
        for name in ["t.jsonl", "t.lock"] {
            let mode = std::fs::metadata(tmp.path().join(name))
                .expect("stat")
                .mode()
                & 0o777;
            assert_eq!(mode, 0o600, "{name}");
        }
    }

    #[tokio::test]
    async fn without_the_ledger_each_line_is_still_written_and_answered() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let wake = tmp.path().join("wake");
        crate::wakedir::ensure_wake_dir(&wake).expect("wake dir");
        let db = tmp.path().join("ledger.db");
        let store = Store::open(&db).expect("ledger");
        let spool = Spool::open(wake.clone(), store, SpoolOptions::default()).expect("open");
        let first = spool
            .append(&sid("t"), "{\"n\": 1}\n".into(), row("t"))
            .await;
        assert!(matches!(first, Ok(Some(_))), "recorded: {first:?}");
        // The ledger breaks under the spool: the table its rounds go to is gone.
        rusqlite::Connection::open(&db)
            .and_then(|c| c.execute_batch("DROP TABLE spool_pending"))
            .expect("drop the rounds' table");
        for n in 2..=3 {
            let line = format!("{{\"n\": {n}}}\n");
            let answer = spool.append(&sid("t"), line, row("t")).await;
            // Written and synced file by file, with no ledger row to answer with.
            assert!(matches!(answer, Ok(None)), "line {n}: {answer:?}");
        }
        let text = std::fs::read_to_string(wake.join("t.jsonl")).expect("read");
        assert_eq!(text, "{\"n\": 1}\n{\"n\": 2}\n{\"n\": 3}\n");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_appends_are_batched_without_tearing() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let spool = Arc::new(spool_in(tmp.path()));
        let payload = "x".repeat(100_000);
        let tasks: Vec<_> = (0..64)
            .map(|i| {
                let spool = spool.clone();
                let line = format!("{{\"i\": {i}, \"p\": \"{payload}\"}}\n");
                tokio::spawn(async move { spool.append(&sid("t"), line, row("t")).await })
            })
            .collect();
        for t in tasks {
            t.await.expect("join").expect("append");
        }
        let text = std::fs::read_to_string(tmp.path().join("t.jsonl")).expect("read");
        let mut seen: Vec<i64> = text
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).expect("whole line")["i"]
                    .as_i64()
                    .expect("i")
            })
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..64).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn refuses_symlinked_spool_and_lock_without_touching_targets() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::symlink(outside.path().join("victim"), tmp.path().join("a.jsonl"))
            .expect("symlink");
        std::os::unix::fs::symlink(outside.path().join("lockvictim"), tmp.path().join("b.lock"))
            .expect("symlink");
        let spool = spool_in(tmp.path());
        assert!(matches!(
            spool.append(&sid("a"), "{}\n".into(), row("a")).await,
            Err(SpoolError::Symlink(_))
        ));
        assert!(matches!(
            spool.append(&sid("b"), "{}\n".into(), row("b")).await,
            Err(SpoolError::Symlink(_))
        ));
        assert!(!outside.path().join("victim").exists());
        assert!(!outside.path().join("lockvictim").exists());
        assert!(!tmp.path().join("b.jsonl").exists());
    }

    #[tokio::test]
    async fn a_torn_tail_never_swallows_the_next_line() {
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::write(tmp.path().join("t.jsonl"), "{\"a\": 1}\n{\"torn\": ").expect("seed");
        spool_in(tmp.path())
            .append(&sid("t"), "{\"b\": 2}\n".into(), row("t"))
            .await
            .expect("append");
        let text = std::fs::read_to_string(tmp.path().join("t.jsonl")).expect("read");
        assert_eq!(text, "{\"a\": 1}\n{\"torn\": \n{\"b\": 2}\n");
    }

    #[tokio::test]
    async fn held_lock_times_out_and_other_sessions_still_append() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let options = SpoolOptions {
            lock_budget: Duration::from_millis(300),
            ..SpoolOptions::default()
        };
        let spool = Spool::open(tmp.path().to_path_buf(), ledger(), options).expect("open");
        let held = File::create(tmp.path().join("a.lock")).expect("lock file");
        held.lock().expect("flock");
        let started = std::time::Instant::now();
        let (sid_a, sid_b) = (sid("a"), sid("b"));
        let (a, b) = tokio::join!(
            spool.append(&sid_a, "{}\n".into(), row("a")),
            spool.append(&sid_b, "{}\n".into(), row("b"))
        );
        assert_eq!(a, Err(SpoolError::LockTimeout("a".into())));
        assert!(b.is_ok());
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert!(!tmp.path().join("a.jsonl").exists());
        held.unlock().expect("unlock");
        spool
            .append(&sid("a"), "{}\n".into(), row("a"))
            .await
            .expect("after unlock");
    }

    /// Descriptors of this process still open on `path` (after it was deleted, too).
    fn open_descriptors_on(path: &Path) -> usize {
        std::fs::read_dir("/proc/self/fd")
            .expect("fd dir")
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|target| {
                target
                    .to_string_lossy()
                    .starts_with(&*path.to_string_lossy())
            })
            .count()
    }

    #[tokio::test]
    async fn a_spool_a_drainer_took_and_deleted_is_let_go_after_a_sync_interval() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let options = SpoolOptions {
            checkpoint_every: Duration::from_millis(50),
            ..SpoolOptions::default()
        };
        let spool = Spool::open(tmp.path().to_path_buf(), ledger(), options).expect("open");
        spool
            .append(&sid("d"), "{}\n".into(), row("d"))
            .await
            .expect("append");
        let taken = tmp.path().join("d.jsonl.taken");
        std::fs::rename(tmp.path().join("d.jsonl"), &taken).expect("drain");
        std::fs::remove_file(&taken).expect("done with it");
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while open_descriptors_on(&taken) > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the deleted spool is still held open"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lines_waiting_for_a_drainer_keep_their_order_past_the_round_budget() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let spool = Arc::new(spool_in(tmp.path()));
        let held = File::create(tmp.path().join("o.lock")).expect("lock file");
        held.lock().expect("flock");
        // Three 1.5 MiB lines, queued in this order (`join_all` polls them in order): together
        // more than one round takes.
        let o = sid("o");
        let appends = futures::future::join_all((0..3).map(|i| {
            let line = format!("{{\"i\": {i}, \"p\": \"{}\"}}\n", "x".repeat(3 << 19));
            spool.append(&o, line, row("o"))
        }));
        let release = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            held.unlock().expect("unlock");
        };
        let (results, ()) = tokio::join!(appends, release);
        for result in results {
            result.expect("append");
        }
        let text = std::fs::read_to_string(tmp.path().join("o.jsonl")).expect("read");
        let order: Vec<i64> = text
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).expect("line")["i"]
                    .as_i64()
                    .expect("i")
            })
            .collect();
        assert_eq!(order, [0, 1, 2]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn closing_while_a_drainer_holds_a_lock_returns_after_the_line_deadline() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let options = SpoolOptions {
            lock_budget: Duration::from_millis(400),
            ..SpoolOptions::default()
        };
        let spool =
            Arc::new(Spool::open(tmp.path().to_path_buf(), ledger(), options).expect("open"));
        let held = File::create(tmp.path().join("h.lock")).expect("lock file");
        held.lock().expect("flock");
        let waiting = {
            let spool = spool.clone();
            tokio::spawn(async move { spool.append(&sid("h"), "{}\n".into(), row("h")).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        let closer = spool.clone();
        tokio::time::timeout(
            Duration::from_secs(5),
            tokio::task::spawn_blocking(move || closer.close()),
        )
        .await
        .expect("close returns once the waiting line's deadline passes")
        .expect("close");
        assert_eq!(
            waiting.await.expect("join"),
            Err(SpoolError::LockTimeout("h".into()))
        );
    }

    #[tokio::test]
    async fn recreates_a_vanished_wake_dir_once() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("wake");
        crate::wakedir::ensure_wake_dir(&dir).expect("prepare");
        let spool = spool_in(&dir);
        std::fs::remove_dir_all(&dir).expect("rm -rf");
        spool
            .append(&sid("t"), "{}\n".into(), row("t"))
            .await
            .expect("append after rm");
        assert!(dir.join("t.jsonl").exists());
        assert_eq!(std::fs::metadata(&dir).expect("stat").mode() & 0o777, 0o700);
    }
}
