//! The single writer thread: it owns the write connection, takes jobs from a channel and commits
//! everything queued in one transaction (group commit), then acknowledges each job with its own
//! outcome. It does not open or configure the connection (that is `store::open`) and knows
//! nothing of what the records mean (that is `records`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::{Connection, TransactionBehavior};
use tokio::sync::{mpsc, oneshot};

use super::StoreError;
use super::records::{self, Record};

/// Most jobs folded into one transaction. Bounds how long the first caller of a very large
/// burst waits for its ack; at ~2 µs per insert a full batch still commits within a few ms.
pub const MAX_BATCH: usize = 1024;

/// At most one "ledger write failed" warning per this interval; every caller still gets its
/// error, so the log only needs to show that (and how often) it keeps happening.
const FAILURE_WARN_EVERY: Duration = Duration::from_secs(60);

/// What a job asks the writer to do.
#[derive(Debug)]
pub(crate) enum Op {
    Record(Record),
    /// Delete up to `limit` deliveries older than `cutoff_ms`.
    PruneDeliveries {
        cutoff_ms: i64,
        limit: u32,
    },
}

/// One queued write and where to send its outcome (rows affected, or the error).
#[derive(Debug)]
pub(crate) struct Job {
    pub op: Op,
    pub ack: oneshot::Sender<Result<u64, StoreError>>,
}

/// Counters the writer keeps for `Store::write_stats` (and metrics).
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
    /// Transactions committed.
    pub commits: u64,
    /// Jobs (records and prune steps) acknowledged as committed.
    pub jobs: u64,
    /// Total wall time spent from BEGIN to COMMIT across all commits.
    pub commit_time: Duration,
    /// The most jobs ever committed by one transaction.
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

/// Starts the writer thread. It ends when every sender is gone and the queue is drained.
pub(crate) fn spawn(
    conn: Connection,
    jobs: mpsc::Receiver<Job>,
    counters: Arc<Counters>,
    path: PathBuf,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("wakebridge-store-writer".into())
        .spawn(move || run(conn, jobs, &counters, &path))
}

/// Rate limit for failure warnings: repeats are counted and reported with the next warning.
#[derive(Default)]
struct FailureLog {
    last_warned: Option<Instant>,
    suppressed: u64,
}

impl FailureLog {
    fn failed(&mut self, path: &Path, err: &rusqlite::Error, jobs: usize) {
        let due = self
            .last_warned
            .is_none_or(|last| last.elapsed() >= FAILURE_WARN_EVERY);
        if due {
            tracing::warn!(
                path = %path.display(),
                error = %err,
                jobs,
                suppressed_since_last = self.suppressed,
                "ledger write failed"
            );
            self.last_warned = Some(Instant::now());
            self.suppressed = 0;
        } else {
            tracing::debug!(path = %path.display(), error = %err, jobs, "ledger write failed");
            self.suppressed += 1;
        }
    }
}

/// How long the writer lets queued records gather after the first one arrives. Every commit
/// writes each page it touched to the WAL once, so under load a longer gathering means far
/// fewer page writes (each busy session's index leaf is written once per commit, not once per
/// row). Delivery rows are not awaited by the request, so this costs no answer any latency.
const LINGER: Duration = Duration::from_millis(20);
/// Check for new jobs this often while lingering; a job someone awaits (a wake that must survive
/// a restart, the hook CLI) ends the gathering at the next check.
const LINGER_STEP: Duration = Duration::from_millis(2);

fn run(mut conn: Connection, mut jobs: mpsc::Receiver<Job>, counters: &Counters, path: &Path) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut failures = FailureLog::default();
    while let Some(first) = jobs.blocking_recv() {
        let until = Instant::now() + LINGER;
        let mut awaited = !first.ack.is_closed();
        batch.push(first);
        loop {
            while batch.len() < MAX_BATCH {
                match jobs.try_recv() {
                    Ok(job) => {
                        awaited |= !job.ack.is_closed();
                        batch.push(job);
                    }
                    Err(_) => break,
                }
            }
            let left = until.saturating_duration_since(Instant::now());
            if awaited || batch.len() >= MAX_BATCH || left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(LINGER_STEP));
        }
        commit_batch(&mut conn, &mut batch, counters, path, &mut failures);
    }
}

/// Commits `batch` in one IMMEDIATE transaction, each job inside its own savepoint so one
/// failing job (a constraint, say) fails only its caller. Acks go out only after COMMIT returns.
fn commit_batch(
    conn: &mut Connection,
    batch: &mut Vec<Job>,
    counters: &Counters,
    path: &Path,
    failures: &mut FailureLog,
) {
    let started = Instant::now();
    // IMMEDIATE takes the write lock at BEGIN, so lock waits happen under busy_timeout instead
    // of surfacing as SQLITE_BUSY_SNAPSHOT halfway through the batch.
    let mut tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(err) => return fail_all(batch, err, path, failures),
    };
    let mut outcomes = Vec::with_capacity(batch.len());
    for job in batch.iter() {
        outcomes.push(apply_in_savepoint(&mut tx, &job.op));
    }
    match tx.commit() {
        Ok(()) => {
            counters.committed(batch.len(), started.elapsed());
            for (job, outcome) in batch.drain(..).zip(outcomes) {
                let outcome = outcome.map_err(|err| StoreError::write(path, err));
                // A caller that stopped waiting (its future was dropped) needs no answer.
                let _ = job.ack.send(outcome);
            }
        }
        Err(err) => fail_all(batch, err, path, failures),
    }
}

fn apply_in_savepoint(tx: &mut rusqlite::Transaction<'_>, op: &Op) -> rusqlite::Result<u64> {
    let savepoint = tx.savepoint()?;
    let affected = match op {
        Op::Record(record) => records::apply(&savepoint, record).map(|()| 1)?,
        Op::PruneDeliveries { cutoff_ms, limit } => {
            records::prune_deliveries(&savepoint, *cutoff_ms, *limit)?
        }
    };
    savepoint.commit()?;
    Ok(affected)
}

fn fail_all(batch: &mut Vec<Job>, err: rusqlite::Error, path: &Path, failures: &mut FailureLog) {
    failures.failed(path, &err, batch.len());
    let shared = Arc::new(err);
    for job in batch.drain(..) {
        let _ = job.ack.send(Err(StoreError::Write {
            path: path.to_path_buf(),
            source: Arc::clone(&shared),
        }));
    }
}
