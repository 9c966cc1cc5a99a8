//! The durable per-session spool: `<wake_dir>/<sid>.jsonl`, one JSON line per delivered event,
//! appended under a non-blocking `flock(2)` on the sibling `<sid>.lock` (retried to a 2 s
//! deadline) exactly as the Python bridge's drain contract expects, and made durable (fdatasync,
//! plus the directory when the file is new) before the caller answers the bus.
//!
//! fsync costs 0.2–0.8 ms here, so one fsync per request on a busy session would cap
//! throughput. Appends are therefore group-committed per session: requests queue their line; one
//! blocking thread at a time is the session's flusher, writes everything queued in one `write`
//! under one lock and one fsync, answers every request in the batch, and loops while more is
//! queued. Under load batches grow by themselves; an idle session pays one fsync for one line.
//! Sessions flush independently, so a stuck drainer on one session never delays another.

use std::collections::HashMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::deadline::Deadline;
use crate::event::is_safe_session_id;

/// How long an append may wait for a drainer to release `<sid>.lock`. Together with the
/// injection budget it must stay well under the bus's 5 s timeout.
pub const LOCK_BUDGET: Duration = Duration::from_secs(2);
/// Pause between lock attempts (the reference's 0.1 s, so both bridges behave alike).
const LOCK_RETRY: Duration = Duration::from_millis(100);
/// Above this many idle session queues, idle ones are dropped (ids can be invented by any
/// publisher; the map must not grow with them).
const MAX_IDLE_QUEUES: usize = 4096;
/// Mode of everything the spool creates.
const FILE_MODE: u32 = 0o600;
/// Mode the wake dir is (re)created with.
pub const DIR_MODE: u32 = 0o700;

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum SpoolError {
    #[error("spool file {0} is a symlink; remove it so the bridge can append")]
    Symlink(PathBuf),
    #[error("session id {0:?} would escape the wake dir")]
    EscapesWakeDir(String),
    #[error("Could not lock spool for {0} within 2s (stuck drainer?)")]
    LockTimeout(String),
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
    /// A stable short name for metrics and the ledger.
    pub fn kind(&self) -> &'static str {
        match self {
            SpoolError::Symlink(_) => "symlink",
            SpoolError::EscapesWakeDir(_) => "escape",
            SpoolError::LockTimeout(_) => "lock-timeout",
            SpoolError::Io {
                kind: io::ErrorKind::StorageFull,
                ..
            } => "no-space",
            SpoolError::Io { .. } => "io",
            SpoolError::WriterGone(_) => "writer-gone",
        }
    }
}

struct Pending {
    line: String,
    deadline: Deadline,
    done: oneshot::Sender<Result<(), SpoolError>>,
}

/// One session's queue of lines waiting for the next flush.
#[derive(Default)]
struct SessionQueue {
    pending: Mutex<Vec<Pending>>,
    /// Set while a blocking thread is this session's flusher. The flusher keeps draining the
    /// queue until it finds it empty, so under load batches follow each other without a round
    /// trip through the async runtime.
    flushing: AtomicBool,
}

/// Appends spool lines for every session of one wake dir.
pub struct Spool {
    wake_dir: PathBuf,
    lock_budget: Duration,
    queues: Mutex<HashMap<String, Arc<SessionQueue>>>,
}

impl Spool {
    /// `wake_dir` must already be resolved (absolute, symlinks followed) by the caller.
    pub fn new(wake_dir: PathBuf) -> Self {
        Self::with_lock_budget(wake_dir, LOCK_BUDGET)
    }

    /// As `new`, with another lock deadline (tests shorten it).
    pub fn with_lock_budget(wake_dir: PathBuf, lock_budget: Duration) -> Self {
        Self {
            wake_dir,
            lock_budget,
            queues: Mutex::new(HashMap::new()),
        }
    }

    pub fn wake_dir(&self) -> &Path {
        &self.wake_dir
    }

    /// Appends `line` (newline included) to `sid`'s spool and returns once it is durable.
    pub async fn append(&self, sid: &str, line: String) -> Result<(), SpoolError> {
        if !is_safe_session_id(sid) {
            return Err(SpoolError::EscapesWakeDir(sid.to_string()));
        }
        let queue = self.queue(sid);
        let (done, answer) = oneshot::channel();
        let deadline = Deadline::after(self.lock_budget);
        lock(&queue.pending).push(Pending {
            line,
            deadline,
            done,
        });
        if !queue.flushing.swap(true, Ordering::SeqCst) {
            let (dir, owned_sid) = (self.wake_dir.clone(), sid.to_string());
            tokio::task::spawn_blocking(move || drain(&queue, &dir, &owned_sid));
        }
        answer
            .await
            .map_err(|_| SpoolError::WriterGone(sid.to_string()))?
    }

    fn queue(&self, sid: &str) -> Arc<SessionQueue> {
        let mut queues = lock(&self.queues);
        if queues.len() > MAX_IDLE_QUEUES {
            queues.retain(|_, q| Arc::strong_count(q) > 1);
        }
        queues.entry(sid.to_string()).or_default().clone()
    }
}

/// The flusher: writes whatever is queued as one batch (one lock, one write, one fdatasync),
/// answers every line in it, and goes on until the queue is empty.
fn drain(queue: &SessionQueue, wake_dir: &Path, sid: &str) {
    /// Hands the flusher role back even if a batch panics, so the session is never wedged.
    struct Release<'a>(&'a AtomicBool);
    impl Drop for Release<'_> {
        fn drop(&mut self) {
            self.0.store(false, Ordering::SeqCst);
        }
    }
    let _release = Release(&queue.flushing);
    loop {
        let batch = std::mem::take(&mut *lock(&queue.pending));
        if batch.is_empty() {
            queue.flushing.store(false, Ordering::SeqCst);
            // A line queued between the take and the store found `flushing` still set and
            // left it to us: take the role back, unless another flusher already has.
            if lock(&queue.pending).is_empty() || queue.flushing.swap(true, Ordering::SeqCst) {
                return;
            }
            continue;
        }
        // The earliest request's deadline bounds the whole batch.
        let deadline = batch
            .iter()
            .map(|p| p.deadline)
            .min_by_key(|d| d.instant())
            .unwrap_or_else(|| Deadline::after(LOCK_BUDGET));
        let mut bytes = String::with_capacity(batch.iter().map(|p| p.line.len()).sum());
        for p in &batch {
            bytes.push_str(&p.line);
        }
        let result = write_batch(wake_dir, sid, bytes.as_bytes(), deadline);
        for p in batch {
            let _ = p.done.send(result.clone());
        }
    }
}

/// Poisoning only means another request panicked mid-push; the vector is still consistent.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Creates the wake dir if needed and narrows it to 0700.
pub fn prepare_wake_dir(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_MODE))
}

fn write_batch(
    wake_dir: &Path,
    sid: &str,
    bytes: &[u8],
    deadline: Deadline,
) -> Result<(), SpoolError> {
    match append_locked(wake_dir, sid, bytes, deadline) {
        // The wake dir vanished (an `rm -rf` by hand): recreate it once, same deadline.
        Err(SpoolError::Io {
            kind: io::ErrorKind::NotFound,
            ..
        }) => {
            prepare_wake_dir(wake_dir).map_err(|e| io_error(sid, wake_dir, e))?;
            append_locked(wake_dir, sid, bytes, deadline)
        }
        other => other,
    }
}

fn io_error(sid: &str, path: &Path, e: io::Error) -> SpoolError {
    SpoolError::Io {
        sid: sid.to_string(),
        path: path.to_path_buf(),
        kind: e.kind(),
        message: e.to_string(),
    }
}

fn open_options() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.write(true)
        .create(true)
        .append(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    o
}

fn append_locked(
    wake_dir: &Path,
    sid: &str,
    bytes: &[u8],
    deadline: Deadline,
) -> Result<(), SpoolError> {
    let spool_path = wake_dir.join(format!("{sid}.jsonl"));
    let lock_path = wake_dir.join(format!("{sid}.lock"));
    if spool_path.parent() != Some(wake_dir) {
        return Err(SpoolError::EscapesWakeDir(sid.to_string()));
    }
    let existed = match std::fs::symlink_metadata(&spool_path) {
        Ok(meta) if meta.file_type().is_symlink() => return Err(SpoolError::Symlink(spool_path)),
        Ok(_) => true,
        Err(_) => false,
    };
    let lock_file = open_options()
        .open(&lock_path)
        .map_err(|e| io_error(sid, &lock_path, e))?;
    acquire(&lock_file, sid, &lock_path, deadline)?;
    let mut spool = open_options()
        .read(true)
        .open(&spool_path)
        .map_err(|e| io_error(sid, &spool_path, e))?;
    let before = spool
        .metadata()
        .map_err(|e| io_error(sid, &spool_path, e))?
        .len();
    // A tail torn by an earlier host crash would glue our first line onto it: start fresh.
    let torn_tail = before > 0 && {
        let mut last = [0u8; 1];
        spool.read_exact_at(&mut last, before - 1).is_ok() && last[0] != b'\n'
    };
    let written = if torn_tail {
        spool.write_all(b"\n")
    } else {
        Ok(())
    }
    .and_then(|()| spool.write_all(bytes))
    .and_then(|()| spool.sync_data());
    if let Err(e) = written {
        // Never leave a torn line: cut back to what was there (nobody else appends under the lock).
        let _ = spool.set_len(before);
        let _ = spool.sync_data();
        return Err(io_error(sid, &spool_path, e));
    }
    if !existed {
        // A new file's directory entry must be durable too, or a crash can lose the whole file.
        File::open(wake_dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_error(sid, wake_dir, e))?;
    }
    drop(spool);
    let _ = lock_file.unlock();
    Ok(())
}

fn acquire(
    lock_file: &File,
    sid: &str,
    lock_path: &Path,
    deadline: Deadline,
) -> Result<(), SpoolError> {
    loop {
        match lock_file.try_lock() {
            Ok(()) => return Ok(()),
            Err(TryLockError::WouldBlock) => {
                if deadline.expired() {
                    return Err(SpoolError::LockTimeout(sid.to_string()));
                }
                std::thread::sleep(LOCK_RETRY.min(deadline.remaining()));
            }
            Err(TryLockError::Error(e)) => return Err(io_error(sid, lock_path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn spool_in(dir: &Path) -> Spool {
        Spool::new(dir.to_path_buf())
    }

    #[tokio::test]
    async fn appends_lines_with_private_modes() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let spool = spool_in(tmp.path());
        spool
            .append("t", "{\"a\": 1}\n".into())
            .await
            .expect("append");
        spool
            .append("t", "{\"a\": 2}\n".into())
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_appends_are_batched_without_tearing() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let spool = Arc::new(spool_in(tmp.path()));
        let payload = "x".repeat(100_000);
        let tasks: Vec<_> = (0..64)
            .map(|i| {
                let spool = spool.clone();
                let line = format!("{{\"i\": {i}, \"p\": \"{payload}\"}}\n");
                tokio::spawn(async move { spool.append("t", line).await })
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
            spool.append("a", "{}\n".into()).await,
            Err(SpoolError::Symlink(_))
        ));
        assert!(matches!(
            spool.append("b", "{}\n".into()).await,
            Err(SpoolError::Io { .. })
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
            .append("t", "{\"b\": 2}\n".into())
            .await
            .expect("append");
        let text = std::fs::read_to_string(tmp.path().join("t.jsonl")).expect("read");
        assert_eq!(text, "{\"a\": 1}\n{\"torn\": \n{\"b\": 2}\n");
    }

    #[tokio::test]
    async fn unsafe_ids_never_reach_the_file_system() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let spool = spool_in(&tmp.path().join("wake"));
        assert!(matches!(
            spool.append("../escape", "{}\n".into()).await,
            Err(SpoolError::EscapesWakeDir(_))
        ));
        assert!(!tmp.path().join("escape.jsonl").exists());
    }

    #[tokio::test]
    async fn held_lock_times_out_and_other_sessions_still_append() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let spool = Spool::with_lock_budget(tmp.path().to_path_buf(), Duration::from_millis(300));
        let held = File::create(tmp.path().join("a.lock")).expect("lock file");
        held.lock().expect("flock");
        let started = std::time::Instant::now();
        let (a, b) = tokio::join!(
            spool.append("a", "{}\n".into()),
            spool.append("b", "{}\n".into())
        );
        assert_eq!(a, Err(SpoolError::LockTimeout("a".into())));
        assert!(b.is_ok());
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert!(!tmp.path().join("a.jsonl").exists());
        held.unlock().expect("unlock");
        spool
            .append("a", "{}\n".into())
            .await
            .expect("after unlock");
    }

    #[tokio::test]
    async fn recreates_a_vanished_wake_dir_once() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("wake");
        prepare_wake_dir(&dir).expect("prepare");
        let spool = spool_in(&dir);
        std::fs::remove_dir_all(&dir).expect("rm -rf");
        spool
            .append("t", "{}\n".into())
            .await
            .expect("append after rm");
        assert!(dir.join("t.jsonl").exists());
        assert_eq!(std::fs::metadata(&dir).expect("stat").mode() & 0o777, 0o700);
    }
}
