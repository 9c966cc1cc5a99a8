//! wakebridge's memory: an embedded SQLite ledger (deliveries, sessions seen, wakes, nudges,
//! owed wakes, usage limits, rewinds and renames) kept across restarts. It owns opening the
//! file, the group-commit write path and the reads; what to record is its callers' choice.
//! Writes go to one writer thread: `record(..).await` resolves once the transaction holding it
//! committed, and everything queued meanwhile shares the next commit. Reads use a small pool of
//! read-only WAL connections that never block the writer; they are synchronous and indexed.

mod caused;
mod commands;
mod error;
mod forget;
mod limits;
mod open;
mod queries;
mod records;
mod rounds;
mod samples;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::Connection;
use rusqlite::TransactionBehavior::Immediate;
use tokio::sync::oneshot;

pub use queries::{
    Alias, InboxRow, Limit, Owed, Paid, Pause, RewindFacts, RewindRow, Rewinds, SeenIdentity,
    SessionRow,
};
pub use records::{
    ALL_SESSIONS, Delivery, DeliverySource, LimitSource, NudgeState, Payment, Record,
    RewindOutcome, RewindWhy, SessionSeen,
};
pub use rounds::{PendingBytes, RoundIds, SpoolRound};
pub use samples::{HourOfTexts, Sample};
pub use writer::WriteStats;

pub use caused::Caused;
pub use error::StoreError;
pub use limits::LimitSeen;
use open::{create_file, open_current, open_reader, open_writer};
use writer::{Ack, Applied, Counters, Job, Op};

/// A blocking task sending a job once the writer's queue has room.
type WaitForRoom = tokio::task::JoinHandle<Result<(), StoreError>>;

/// Writes queued before `record` waits for room: keeps a stuck disk from growing memory.
pub const WRITE_QUEUE_CAPACITY: usize = 4096;

/// Read connections kept for reuse; more concurrent readers open and close their own.
pub const READ_POOL_SIZE: usize = 4;

/// Rows per `prune_older_than` transaction: a few ms of write lock, never a hot-path delay.
pub const PRUNE_CHUNK_ROWS: u32 = 5000;

/// A handle on the ledger. Cheap to clone; the writer thread stops (after committing what is
/// queued) when the last clone is dropped, and that drop waits for it.
#[derive(Clone, Debug)]
pub struct Store {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    /// `None` only while dropping, so the writer sees the channel close.
    jobs: Option<SyncSender<Job>>,
    /// Jobs sent and not yet taken by the writer.
    queued: Arc<AtomicUsize>,
    writer: Option<JoinHandle<()>>,
    readers: Mutex<Vec<Connection>>,
    /// A reader of its own for [`Store::version`]: its `data_version` moves with every commit
    /// of any other connection (this daemon's writer, a hook's).
    versions: Mutex<Option<Connection>>,
    counters: Arc<Counters>,
    /// Keeps the directory of an `open_in_memory` ledger alive; dropped last.
    _scratch: Option<tempfile::TempDir>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(writer) = self.writer.take()
            && writer.join().is_err()
        {
            tracing::error!(path = %self.path.display(), "ledger writer thread panicked");
        }
    }
}

impl Store {
    /// Opens (creating if needed, 0700 dirs and a 0600 file) the ledger at `path` and migrates
    /// it. A corrupt file, another program's database or a newer wakebridge's is refused with
    /// an error naming the file and the fix; it is never recreated over.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        Self::start(path.to_path_buf(), None)
    }

    /// Writes `batch` in one transaction with a connection of its own, for the `wakebridge hook`
    /// CLI (run on every tool call): no writer thread, no integrity check. A ledger missing, not
    /// ours or at another version goes through `Store::open` instead.
    pub fn record_once(path: &Path, batch: Vec<Record>) -> Result<(), StoreError> {
        let op = write_records(batch);
        let Some(mut conn) = open_current(path) else {
            return Store::open(path)?.submit_blocking(false, op).map(drop);
        };
        let committed = conn.transaction_with_behavior(Immediate).and_then(|tx| {
            op(&tx)?;
            tx.commit()
        });
        committed.map_err(|source| StoreError::write(path, source))
    }

    /// Pays `session_id`'s owed events with a connection of its own, for the hook CLI: `deliver`
    /// gets how many were owed (if any) and says whether it delivered the wake; only then is the
    /// payment committed, so a wake not handed over stays owed. Returns how many were paid.
    pub fn pay_once(
        path: &Path,
        session_id: &str,
        how: Payment,
        deliver: impl FnOnce(u64) -> bool,
    ) -> Result<u64, StoreError> {
        let Some(mut conn) = open_current(path) else {
            return Ok(0);
        };
        let paid = conn.transaction_with_behavior(Immediate).and_then(|tx| {
            let now_ms = crate::clock::now_ms();
            // A paused session's Stop hook keeps nothing going: what it is owed waits for
            // unpause. Nor does one whose debt the daemon is paying right now: it would be told
            // twice.
            if queries::pause_of(&tx, session_id, now_ms)?.is_some()
                || records::claimed(&tx, session_id, now_ms)?
            {
                return Ok(0);
            }
            let owed = records::pay(&tx, session_id, now_ms, how)?;
            if owed == 0 || !deliver(owed) {
                return Ok(0);
            }
            tx.commit()?;
            Ok(owed)
        });
        paid.map_err(|source| StoreError::write(path, source))
    }

    /// Claims what `session_id` is owed for a wake about to be sent, for `budget`: its Stop
    /// hook leaves the debt to that wake meanwhile. How many events are owed (0: none, nothing
    /// claimed); the wake's `Record::Pay` or a clean refusal's `Record::Unclaim` ends the claim,
    /// else it lapses.
    pub async fn claim_owed(&self, session_id: &str, budget: Duration) -> Result<u32, StoreError> {
        let session_id = session_id.to_owned();
        let until_ms = crate::clock::now_ms().saturating_add(crate::clock::duration_ms(budget));
        self.write_rows(move |conn| records::claim(conn, &session_id, until_ms).map(u64::from))
            .await
            .map(|owed| u32::try_from(owed).unwrap_or(u32::MAX))
    }

    /// A throwaway ledger for tests, deleted on drop: a real file (on /dev/shm, tmpfs, when
    /// there) rather than `:memory:`, so the writer and readers are separate WAL connections.
    pub fn open_in_memory() -> Result<Store, StoreError> {
        let mut builder = tempfile::Builder::new();
        builder.prefix("wakebridge-store-");
        let scratch = builder
            .tempdir_in("/dev/shm")
            .or_else(|_| builder.tempdir())
            .map_err(StoreError::Scratch)?;
        Self::start(scratch.path().join("wakebridge.db"), Some(scratch))
    }

    fn start(path: PathBuf, scratch: Option<tempfile::TempDir>) -> Result<Store, StoreError> {
        create_file(&path)?;
        let conn = open_writer(&path)?;
        let (jobs, queue) = std::sync::mpsc::sync_channel(WRITE_QUEUE_CAPACITY);
        let counters = Arc::new(Counters::default());
        let queued = Arc::new(AtomicUsize::new(0));
        let writer = {
            let (queued, counters, path) = (queued.clone(), counters.clone(), path.clone());
            std::thread::Builder::new()
                .name("wakebridge-store-writer".into())
                .spawn(move || writer::run(conn, &queue, &queued, &counters, &path))
                .map_err(StoreError::SpawnWriter)?
        };
        Ok(Store {
            inner: Arc::new(Inner {
                path,
                jobs: Some(jobs),
                queued,
                writer: Some(writer),
                readers: Mutex::new(Vec::with_capacity(READ_POOL_SIZE)),
                versions: Mutex::new(None),
                counters,
                _scratch: scratch,
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Writes `record`; resolves once its transaction committed. Dropping the future after the
    /// record was queued cancels only the answer.
    pub async fn record(&self, record: Record) -> Result<(), StoreError> {
        self.submit(write_records(vec![record])).await.map(drop)
    }

    /// Writes `records` in one transaction, all or none; resolves once it has committed.
    pub async fn record_all(&self, records: Vec<Record>) -> Result<(), StoreError> {
        self.submit(write_records(records)).await.map(drop)
    }

    /// Queues `record` without waiting for its commit, in order with everything else queued. For
    /// bookkeeping rows on the hot path; a full queue is waited on by a blocking task.
    pub fn record_queued(&self, record: Record) -> Result<(), StoreError> {
        let (ack, _ignored) = oneshot::channel();
        self.queue(write_records(vec![record]), ack).map(drop)
    }

    /// `record` for synchronous callers (the `wakebridge hook` CLI); never from an async task.
    pub fn record_blocking(&self, record: Record) -> Result<(), StoreError> {
        self.submit_blocking(false, write_records(vec![record]))
            .map(drop)
    }

    /// A number that changes whenever anything was committed to the ledger since it was last
    /// asked (by this daemon or another process): a microsecond's read, so the session loop
    /// can look whether anything changed every second.
    pub fn version(&self) -> Result<u64, StoreError> {
        let read_err = |source| StoreError::Read {
            path: self.inner.path.clone(),
            source,
        };
        let mut conn = crate::lock(&self.inner.versions);
        if conn.is_none() {
            *conn = Some(open_reader(&self.inner.path).map_err(read_err)?);
        }
        let version = (conn.as_ref())
            .map(|c| c.query_row("PRAGMA data_version", [], |row| row.get(0)))
            .transpose()
            .map_err(read_err)?;
        Ok(version.unwrap_or(0))
    }

    pub fn write_stats(&self) -> WriteStats {
        self.inner.counters.snapshot()
    }

    pub fn queued_writes(&self) -> usize {
        self.inner.queued.load(Ordering::Relaxed)
    }

    async fn submit(&self, op: Op) -> Result<Applied, StoreError> {
        let (ack, done) = oneshot::channel();
        if let Some(room) = self.queue(op, ack)? {
            room.await.map_err(|_| self.writer_gone())??;
        }
        done.await.map_err(|_| self.writer_gone())?
    }

    /// Runs `op` on the writer thread; resolves to the rows it reports once committed.
    async fn write_rows(
        &self,
        op: impl FnOnce(&Connection) -> rusqlite::Result<u64> + Send + 'static,
    ) -> Result<u64, StoreError> {
        let op = Box::new(move |conn: &Connection| op(conn).map(Applied::Rows));
        self.submit(op).await.map(Applied::rows)
    }

    /// Sends `op` (`durable`: synced) and blocks until it commits: never from an async task.
    fn submit_blocking(&self, durable: bool, op: Op) -> Result<Applied, StoreError> {
        let (ack, done) = oneshot::channel();
        self.send_blocking(Job { op, durable, ack })?;
        done.blocking_recv().map_err(|_| self.writer_gone())?
    }

    /// Queues `op` (its commit not synced). When the queue is full (a stuck disk), a blocking
    /// task waits for room off the async workers: it is returned, for the caller to await or not.
    fn queue(&self, op: Op, ack: Ack) -> Result<Option<WaitForRoom>, StoreError> {
        let jobs = self.jobs()?;
        self.inner.queued.fetch_add(1, Ordering::Relaxed);
        let job = Job {
            op,
            durable: false,
            ack,
        };
        match jobs.try_send(job) {
            Ok(()) => Ok(None),
            Err(TrySendError::Full(job)) => {
                self.inner.queued.fetch_sub(1, Ordering::Relaxed);
                let store = self.clone();
                Ok(Some(tokio::task::spawn_blocking(move || {
                    store.send_blocking(job)
                })))
            }
            Err(TrySendError::Disconnected(_)) => {
                self.inner.queued.fetch_sub(1, Ordering::Relaxed);
                Err(self.writer_gone())
            }
        }
    }

    /// Queues `job`, waiting for room.
    fn send_blocking(&self, job: Job) -> Result<(), StoreError> {
        let jobs = self.jobs()?;
        self.inner.queued.fetch_add(1, Ordering::Relaxed);
        jobs.send(job).map_err(|_| {
            self.inner.queued.fetch_sub(1, Ordering::Relaxed);
            self.writer_gone()
        })
    }

    fn jobs(&self) -> Result<&SyncSender<Job>, StoreError> {
        self.inner.jobs.as_ref().ok_or_else(|| self.writer_gone())
    }

    fn writer_gone(&self) -> StoreError {
        StoreError::WriterGone {
            path: self.inner.path.clone(),
        }
    }

    /// Runs `query` on a pooled read-only connection (opening one if the pool is empty).
    fn read<T>(
        &self,
        query: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let read_err = |source| StoreError::Read {
            path: self.inner.path.clone(),
            source,
        };
        let pooled = crate::lock(&self.inner.readers).pop();
        let conn = match pooled {
            Some(conn) => conn,
            None => open_reader(&self.inner.path).map_err(read_err)?,
        };
        let result = query(&conn).map_err(read_err);
        let mut pool = crate::lock(&self.inner.readers);
        if pool.len() < READ_POOL_SIZE {
            pool.push(conn);
        }
        result
    }
}

/// The op writing `records` in order, all or none.
fn write_records(records: Vec<Record>) -> Op {
    Box::new(move |conn| {
        for record in &records {
            records::apply(conn, record)?;
        }
        Ok(Applied::Rows(records.len() as u64))
    })
}
