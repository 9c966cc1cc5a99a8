//! The single writer thread: owns the write connection, commits everything queued in one
//! transaction (group commit), then acknowledges each job with its own outcome. Opening the
//! connection is `store::open`'s, what the records mean `records`'.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use rusqlite::{Connection, TransactionBehavior};
use tokio::sync::oneshot;

use super::StoreError;
use super::rounds::RoundIds;
use crate::telemetry::warn::Warnings;

/// Most jobs in one transaction: bounds the first caller's wait in a burst (~2 µs per insert).
pub const MAX_BATCH: usize = 1024;

/// What a job does inside the batch's transaction (its own savepoint).
pub(crate) type Op = Box<dyn FnOnce(&Connection) -> rusqlite::Result<Applied> + Send>;

pub(crate) enum Applied {
    Rows(u64),
    /// A spool round's new row ids, per session.
    Round(Vec<RoundIds>),
}

impl Applied {
    pub(crate) fn rows(self) -> u64 {
        match self {
            Applied::Rows(rows) => rows,
            Applied::Round(ids) => ids.len() as u64,
        }
    }
}

/// Where a job's outcome goes; a caller that stopped waiting (a queued bookkeeping row) closed it.
pub(crate) type Ack = oneshot::Sender<Result<Applied, StoreError>>;

pub(crate) struct Job {
    pub op: Op,
    /// Its commit must be on disk before it is acknowledged (a spool round).
    pub durable: bool,
    pub ack: Ack,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    commits: AtomicU64,
    jobs: AtomicU64,
    commit_time_us: AtomicU64,
    largest_batch: AtomicU64,
}

/// A snapshot of the writer's work since the store was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteStats {
    pub commits: u64,
    pub jobs: u64,
    /// From BEGIN to COMMIT, summed.
    pub commit_time: Duration,
    pub largest_batch: u64,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> WriteStats {
        WriteStats {
            commits: self.commits.load(Ordering::Relaxed),
            jobs: self.jobs.load(Ordering::Relaxed),
            commit_time: Duration::from_micros(self.commit_time_us.load(Ordering::Relaxed)),
            largest_batch: self.largest_batch.load(Ordering::Relaxed),
        }
    }

    fn committed(&self, jobs: usize, elapsed: Duration) {
        let jobs = u64::try_from(jobs).unwrap_or(u64::MAX);
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.jobs.fetch_add(jobs, Ordering::Relaxed);
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.commit_time_us.fetch_add(us, Ordering::Relaxed);
        self.largest_batch.fetch_max(jobs, Ordering::Relaxed);
    }
}

/// How long queued records gather after the first arrives: a commit writes each page it
/// touched once, so under load fewer commits mean far fewer page writes. A job someone awaits
/// (a spool round, a wake, the hook CLI) ends the gathering the moment it arrives.
const LINGER: Duration = Duration::from_millis(20);

/// The writer thread: it ends when every sender is gone and the queue is drained.
pub(super) fn run(
    mut conn: Connection,
    jobs: &Receiver<Job>,
    queued: &AtomicUsize,
    counters: &Counters,
    path: &Path,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let failures = Warnings::default();
    let mut wal = Wal::new(path);
    let take = |job: Job, batch: &mut Vec<Job>| {
        queued.fetch_sub(1, Ordering::Relaxed);
        let awaited = !job.ack.is_closed();
        batch.push(job);
        awaited
    };
    while let Ok(first) = jobs.recv() {
        let until = Instant::now() + LINGER;
        let mut awaited = take(first, &mut batch);
        while batch.len() < MAX_BATCH {
            let next = if awaited {
                jobs.try_recv().map_err(|_| RecvTimeoutError::Timeout)
            } else {
                jobs.recv_timeout(until.saturating_duration_since(Instant::now()))
            };
            match next {
                Ok(job) => awaited |= take(job, &mut batch),
                Err(_) => break,
            }
        }
        // A commit holding a spool round must reach the disk before it is acknowledged.
        let durable = batch.iter().any(|job| job.durable);
        commit_batch(
            &mut conn,
            &mut batch,
            counters,
            path,
            &failures,
            durable.then_some(&mut wal),
        );
    }
}

/// The ledger's WAL file, fdatasynced after a commit that must be on disk before its ack: the
/// durability of `synchronous = FULL`, without SQLite's fsync(2), which on ext4 also writes the
/// inode (a second device write per commit).
struct Wal {
    path: PathBuf,
    file: Option<std::fs::File>,
}

impl Wal {
    fn new(db: &Path) -> Self {
        let mut path = db.as_os_str().to_owned();
        path.push("-wal");
        Self {
            path: PathBuf::from(path),
            file: None,
        }
    }

    /// fdatasync of the WAL file as it is now (reopened if SQLite replaced it).
    fn sync(&mut self) -> std::io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let current = std::fs::metadata(&self.path)?;
        let same = self
            .file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .is_some_and(|open| (open.dev(), open.ino()) == (current.dev(), current.ino()));
        if !same {
            self.file = Some(std::fs::File::open(&self.path)?);
        }
        match &self.file {
            Some(file) => file.sync_data(),
            None => Ok(()),
        }
    }
}

/// Commits `batch` in one IMMEDIATE transaction, each job in its own savepoint so a failing job
/// fails only its caller. Acks go out only after COMMIT returns.
fn commit_batch(
    conn: &mut Connection,
    batch: &mut Vec<Job>,
    counters: &Counters,
    path: &Path,
    failures: &Warnings,
    durable: Option<&mut Wal>,
) {
    let started = Instant::now();
    // IMMEDIATE takes the write lock at BEGIN, so lock waits happen under busy_timeout instead
    // of surfacing as SQLITE_BUSY_SNAPSHOT halfway through the batch.
    let mut tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(err) => {
            let acks = batch.drain(..).map(|job| job.ack).collect();
            return fail_all(acks, err, path, failures);
        }
    };
    let (ops, acks): (Vec<Op>, Vec<Ack>) = batch.drain(..).map(|job| (job.op, job.ack)).unzip();
    let mut outcomes = Vec::with_capacity(acks.len());
    if ops.len() == 1 {
        // One job: the transaction itself is its savepoint (a failure rolls it all back).
        for op in ops {
            match op(&tx) {
                Ok(applied) => outcomes.push(Ok(applied)),
                Err(err) => {
                    drop(tx);
                    return fail_all(acks, err, path, failures);
                }
            }
        }
    } else {
        for op in ops {
            outcomes.push(apply_in_savepoint(&mut tx, op));
        }
    }
    let committed = tx.commit().and_then(|()| match durable {
        Some(wal) => wal.sync().map_err(|e| {
            rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_IOERR_FSYNC),
                Some(format!("fdatasync of {}: {e}", wal.path.display())),
            )
        }),
        None => Ok(()),
    });
    match committed {
        Ok(()) => {
            counters.committed(acks.len(), started.elapsed());
            for (ack, outcome) in acks.into_iter().zip(outcomes) {
                let _ = ack.send(outcome.map_err(|err| StoreError::write(path, err)));
            }
        }
        Err(err) => fail_all(acks, err, path, failures),
    }
}

fn apply_in_savepoint(tx: &mut rusqlite::Transaction<'_>, op: Op) -> rusqlite::Result<Applied> {
    let savepoint = tx.savepoint()?;
    let applied = op(&savepoint)?;
    savepoint.commit()?;
    Ok(applied)
}

/// Every caller gets its error; the log says so at most once a minute.
fn fail_all(acks: Vec<Ack>, err: rusqlite::Error, path: &Path, failures: &Warnings) {
    let jobs = acks.len();
    let path_shown = path.display();
    crate::warn_limited!(
        failures,
        "ledger write",
        path = %path_shown,
        error = %err,
        jobs,
        "ledger write failed"
    );
    let shared = Arc::new(err);
    for ack in acks {
        let _ = ack.send(Err(StoreError::Write {
            path: path.to_path_buf(),
            source: Arc::clone(&shared),
        }));
    }
}
