//! The two threads behind `Spool::append`.
//!
//! The writer takes every line queued since its last round, whatever the session: under each
//! session's lock it appends that session's lines to `<sid>.jsonl` (page cache only), then
//! records the whole round in the journal with one fdatasync, releases the locks and answers
//! every request. Under load rounds follow each other back to back and grow by themselves; an
//! idle daemon pays one fdatasync for one line. A session whose lock a drainer holds is retried
//! each round (at least every 100 ms) until its requests' deadlines pass, without holding up
//! anyone else.
//!
//! The checkpointer fsyncs the session files written since its last pass (about once a second,
//! or at once when the ring is getting full) and reports how far the journal is covered; the
//! writer then moves the journal's head, freeing that space.

use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::files::{self, Appended, OpenSpool, SessionLock, io_error};
use super::journal::{self, Entry, Journal, JournalError};
use super::{SpoolError, prepare_wake_dir};
use crate::deadline::Deadline;

/// Pause between attempts on a lock a drainer holds (the reference's 0.1 s).
const LOCK_RETRY: Duration = Duration::from_millis(100);
/// Most line bytes one round takes; the rest waits for the next round (which follows at once).
/// Keeps any one round's journal record well inside the ring.
const ROUND_BYTES: usize = (journal::CAPACITY / 4) as usize;
/// Most sessions one round takes; the rest wait for the next round (which follows at once).
const ROUND_SESSIONS: usize = 256;
/// Open spool files kept between rounds, at most: a quarter of the descriptors this process may
/// open (the listener's sockets and SQLite share the rest), and never more than 4096. Beyond it
/// the cache starts over.
fn max_cached() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass and nothing else.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX)
    } else {
        1024
    };
    (soft / 4).clamp(64, 4096)
}

/// One request's line, waiting for a round.
pub struct Pending {
    pub sid: String,
    pub line: String,
    pub deadline: Deadline,
    pub done: oneshot::Sender<Result<(), SpoolError>>,
}

impl Pending {
    fn answer(self, result: Result<(), SpoolError>) {
        let _ = self.done.send(result);
    }
}

/// What the request side and the two threads share.
pub struct Shared {
    queue: Mutex<Queue>,
    queued: Condvar,
    checkpoint: Mutex<CheckpointState>,
    checkpoint_changed: Condvar,
    checkpoint_every: Duration,
}

#[derive(Default)]
struct Queue {
    pending: Vec<Pending>,
    /// The writer is waiting for work: the next push must wake it (otherwise no syscall).
    writer_waiting: bool,
    closing: bool,
}

#[derive(Default)]
struct CheckpointState {
    /// Session files written since the checkpointer's last pass, by (device, inode).
    dirty: HashMap<(u64, u64), Arc<File>>,
    /// The journal tail after the round that last added to `dirty`.
    written_to: u64,
    /// Every record before this lsn describes bytes in files that are synced.
    synced_to: u64,
    /// The writer needs ring space now.
    urgent: bool,
    /// A session file failed to sync: `synced_to` never moves again (see `checkpointer`).
    failed: bool,
    closing: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Poisoning only means a thread panicked mid-update; the state is still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    pub fn new(checkpoint_every: Duration, journal_tail: u64) -> Self {
        Self {
            queue: Mutex::default(),
            queued: Condvar::new(),
            checkpoint: Mutex::new(CheckpointState {
                written_to: journal_tail,
                synced_to: journal_tail,
                ..CheckpointState::default()
            }),
            checkpoint_changed: Condvar::new(),
            checkpoint_every,
        }
    }

    /// Queues a line for the next round; `false` once the spool is closing.
    pub fn push(&self, pending: Pending) -> Result<(), Pending> {
        let mut queue = lock(&self.queue);
        if queue.closing {
            return Err(pending);
        }
        queue.pending.push(pending);
        if queue.writer_waiting {
            queue.writer_waiting = false;
            self.queued.notify_one();
        }
        Ok(())
    }

    pub fn close(&self) {
        lock(&self.queue).closing = true;
        self.queued.notify_one();
    }
}

/// The writer thread's own state.
pub struct Writer {
    pub shared: Arc<Shared>,
    pub wake_dir: PathBuf,
    pub journal: Journal,
    /// Each recently written session's open spool file, and when it was last written. Files not
    /// written for a sync interval are closed, so a spool a drainer took and deleted does not
    /// keep its disk space (or a descriptor) alive here.
    cache: HashMap<String, (OpenSpool, Instant)>,
    max_cached: usize,
    last_sweep: Instant,
    /// Lines whose session lock a drainer holds, retried every `LOCK_RETRY` at least.
    deferred: Vec<Pending>,
    /// Lines past a round's byte budget, taken by the very next round.
    carried: Vec<Pending>,
    /// The last round fell back to syncing session files (logged once per episode).
    journal_failing: bool,
}

/// A session's share of a round that reached its file.
struct Written {
    pending: Vec<Pending>,
    appended: Appended,
    /// Held until the round is durable, so a drainer never takes a line that is not.
    lock: SessionLock,
}

impl Writer {
    pub fn new(shared: Arc<Shared>, wake_dir: PathBuf, journal: Journal) -> Self {
        Self {
            shared,
            wake_dir,
            journal,
            cache: HashMap::new(),
            max_cached: max_cached(),
            last_sweep: Instant::now(),
            deferred: Vec::new(),
            carried: Vec::new(),
            journal_failing: false,
        }
    }

    /// Runs rounds until the spool closes and everything queued is answered, then leaves the
    /// journal empty (every session file synced).
    pub fn run(mut self, checkpointer: std::thread::JoinHandle<()>) {
        loop {
            let Some(batch) = self.next_batch() else {
                break;
            };
            self.round(batch);
        }
        {
            lock(&self.shared.checkpoint).closing = true;
            self.shared.checkpoint_changed.notify_all();
        }
        let _ = checkpointer.join();
        let (dirty, failed) = {
            let mut state = lock(&self.shared.checkpoint);
            (std::mem::take(&mut state.dirty), state.failed)
        };
        let synced = !failed && dirty.values().all(|f| f.sync_data().is_ok());
        if synced && let Err(e) = self.journal.checkpoint(self.journal.tail()) {
            tracing::warn!(error = %e, "could not mark the spool journal empty at shutdown; the next start re-checks it");
        }
    }

    /// Waits for work: new lines, or a retry of lines whose lock was busy. `None` once closing
    /// and nothing is left.
    fn next_batch(&mut self) -> Option<Vec<Pending>> {
        let mut queue = lock(&self.shared.queue);
        loop {
            if !queue.pending.is_empty() || !self.carried.is_empty() {
                // Older lines first, so each session's lines keep their order.
                let mut batch = std::mem::take(&mut self.carried);
                batch.append(&mut self.deferred);
                batch.append(&mut queue.pending);
                return Some(batch);
            }
            if queue.closing && self.deferred.is_empty() {
                return None;
            }
            drop(queue);
            self.housekeeping();
            queue = lock(&self.shared.queue);
            // Closing with lines still waiting for a drainer: retry them at the usual pace.
            if !queue.pending.is_empty() || (queue.closing && self.deferred.is_empty()) {
                continue;
            }
            queue.writer_waiting = true;
            let wait = if self.deferred.is_empty() {
                self.shared.checkpoint_every
            } else {
                LOCK_RETRY
            };
            let (guard, timeout) = self
                .shared
                .queued
                .wait_timeout(queue, wait)
                .unwrap_or_else(|e| e.into_inner());
            queue = guard;
            queue.writer_waiting = false;
            if timeout.timed_out() && !self.deferred.is_empty() {
                return Some(std::mem::take(&mut self.deferred));
            }
        }
    }

    /// Frees journal space the checkpointer has covered (one small synced write, about once
    /// per checkpoint), and closes spool files idle for a sync interval.
    fn housekeeping(&mut self) {
        let synced = lock(&self.shared.checkpoint).synced_to;
        if synced > self.journal.head()
            && let Err(e) = self.journal.checkpoint(synced)
        {
            tracing::warn!(error = %e, "could not advance the spool journal; will retry");
        }
        let idle_after = self.shared.checkpoint_every;
        if self.last_sweep.elapsed() >= idle_after {
            self.cache
                .retain(|_, (_, used)| used.elapsed() < idle_after);
            self.last_sweep = Instant::now();
        }
    }

    fn round(&mut self, batch: Vec<Pending>) {
        self.housekeeping();
        let mut written = Vec::new();
        let mut entries = Vec::new();
        let mut room = ROUND_BYTES;
        let mut recreated_dir = false;
        for (sid, mut group) in by_session(batch) {
            // Each session in the round holds two descriptors until it is durable.
            if room == 0 || written.len() >= ROUND_SESSIONS {
                self.carried.extend(group);
                continue;
            }
            // The lock first: if a drainer holds it, every line of the session waits, in order.
            let taken = match self.lock_session(&sid, &mut recreated_dir) {
                Ok(Some(lock)) => lock,
                Ok(None) => {
                    self.still_locked(&sid, group);
                    continue;
                }
                Err(e) => {
                    answer_all(group, &Err(e));
                    continue;
                }
            };
            // Lines beyond the round's byte budget go to the next round, which follows at once.
            let fitting = group
                .iter()
                .scan(0, |total, p| {
                    *total += p.line.len();
                    Some(*total)
                })
                .take_while(|&total| total <= room)
                .count();
            let take = if fitting == 0 && room == ROUND_BYTES {
                1
            } else {
                fitting
            };
            self.carried.extend(group.split_off(take));
            if group.is_empty() {
                continue;
            }
            let bytes: Vec<u8> = group.iter().flat_map(|p| p.line.bytes()).collect();
            if !journal::holds(bytes.len()) {
                let e = SpoolError::TooLarge {
                    sid: sid.clone(),
                    bytes: bytes.len(),
                };
                answer_all(group, &Err(e));
                continue;
            }
            let cached = self.cache.get(&sid).map(|(spool, _)| spool);
            match files::append(&self.wake_dir, &sid, cached, &bytes) {
                Ok(appended) => {
                    room = room.saturating_sub(bytes.len());
                    entries.push(Entry {
                        sid,
                        dev: appended.spool.dev,
                        ino: appended.spool.ino,
                        offset: appended.offset,
                        bytes,
                    });
                    written.push(Written {
                        pending: group,
                        appended,
                        lock: taken,
                    });
                }
                Err(e) => answer_all(group, &Err(e)),
            }
        }
        if written.is_empty() {
            return;
        }
        let committed = self.commit(&written, &entries);
        if committed.is_ok() {
            let mut checkpoint = lock(&self.shared.checkpoint);
            for w in &written {
                let spool = &w.appended.spool;
                checkpoint
                    .dirty
                    .entry((spool.dev, spool.ino))
                    .or_insert_with(|| spool.file.clone());
            }
            checkpoint.written_to = self.journal.tail();
        }
        if self.cache.len() > self.max_cached {
            self.cache.clear();
        }
        for (w, e) in written.into_iter().zip(entries) {
            if committed.is_ok() {
                self.cache
                    .insert(e.sid, (w.appended.spool.clone(), Instant::now()));
            } else {
                w.appended.undo();
                self.cache.remove(&e.sid);
            }
            drop(w.lock);
            answer_all(w.pending, &committed);
        }
    }

    /// Takes `<sid>.lock` once. The wake dir vanishing (an `rm -rf` by hand) is repaired once
    /// per round.
    fn lock_session(
        &mut self,
        sid: &str,
        recreated_dir: &mut bool,
    ) -> Result<Option<SessionLock>, SpoolError> {
        match files::try_lock(&self.wake_dir, sid) {
            Err(SpoolError::Io {
                kind: std::io::ErrorKind::NotFound,
                ..
            }) if !*recreated_dir => {
                *recreated_dir = true;
                self.cache.clear();
                prepare_wake_dir(&self.wake_dir).map_err(|e| io_error(sid, &self.wake_dir, e))?;
                files::try_lock(&self.wake_dir, sid)
            }
            other => other,
        }
    }

    /// A drainer holds the lock: lines past their deadline fail, the rest wait for the next round.
    fn still_locked(&mut self, sid: &str, group: Vec<Pending>) {
        for p in group {
            if p.deadline.expired() {
                p.answer(Err(SpoolError::LockTimeout(sid.to_string())));
            } else {
                self.deferred.push(p);
            }
        }
    }

    /// Makes a round durable: new directory entries, then the journal record of every append.
    /// When the journal cannot take the round (no space left on the disk, a file size limit,
    /// an I/O error, or a checkpointer that cannot keep up), each session file is fsynced
    /// instead: slower, equally durable, and nothing of it needs replaying.
    fn commit(&mut self, written: &[Written], entries: &[Entry]) -> Result<(), SpoolError> {
        let sid = &entries[0].sid;
        if written.iter().any(|w| w.appended.created) {
            files::sync_dir(&self.wake_dir).map_err(|e| io_error(sid, &self.wake_dir, e))?;
        }
        let journaled = self.journal_round(entries);
        let Err(e) = journaled else { return Ok(()) };
        if !self.journal_failing {
            tracing::warn!(error = %e, "the spool journal is unavailable; syncing session files one by one until it works again");
            self.journal_failing = true;
        }
        for (w, entry) in written.iter().zip(entries) {
            w.appended.spool.file.sync_data().map_err(|e| {
                io_error(
                    &entry.sid,
                    &files::spool_path(&self.wake_dir, &entry.sid),
                    e,
                )
            })?;
        }
        Ok(())
    }

    fn journal_round(&mut self, entries: &[Entry]) -> Result<(), JournalError> {
        if self.journal.lost() {
            // The wake dir was removed or moved: a journal a restart cannot find would not help.
            self.journal = Journal::open_fresh(&self.wake_dir, self.journal.tail())?;
        }
        let needed = self.journal.space_for(entries)?;
        self.wait_for_space(needed)?;
        self.journal.append(entries)?;
        if self.journal_failing {
            tracing::info!("the spool journal works again");
            self.journal_failing = false;
        }
        Ok(())
    }

    /// Waits (briefly) until the ring has `needed` free bytes, asking the checkpointer to hurry.
    /// A pass of the checkpointer takes milliseconds; if it cannot free the space in
    /// `LOCK_RETRY`, the round syncs its files itself instead of waiting longer.
    fn wait_for_space(&mut self, needed: u64) -> Result<(), JournalError> {
        let deadline = Deadline::after(LOCK_RETRY);
        while !self.journal.fits(needed) {
            let mut state = lock(&self.shared.checkpoint);
            if state.synced_to <= self.journal.head() {
                if deadline.expired() || state.failed {
                    return Err(JournalError::Full);
                }
                state.urgent = true;
                self.shared.checkpoint_changed.notify_all();
                let (guard, _) = self
                    .shared
                    .checkpoint_changed
                    .wait_timeout(state, deadline.remaining())
                    .unwrap_or_else(|e| e.into_inner());
                state = guard;
            }
            let synced = state.synced_to;
            drop(state);
            if synced > self.journal.head() {
                self.journal.checkpoint(synced)?;
            }
        }
        Ok(())
    }
}

fn answer_all(group: Vec<Pending>, result: &Result<(), SpoolError>) {
    for p in group {
        p.answer(result.clone());
    }
}

/// Groups a batch by session, sessions in order of first arrival, lines in arrival order.
fn by_session(batch: Vec<Pending>) -> Vec<(String, Vec<Pending>)> {
    let mut groups: Vec<(String, Vec<Pending>)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for p in batch {
        match index.get(&p.sid) {
            Some(&i) => groups[i].1.push(p),
            None => {
                index.insert(p.sid.clone(), groups.len());
                groups.push((p.sid.clone(), vec![p]));
            }
        }
    }
    groups
}

/// The checkpointer thread: syncs the session files the writer dirtied, then reports how far the
/// journal is covered. If a file fails to sync, nothing is reported again for the life of this
/// process: Linux marks the pages clean after a failed writeback, so a retry could "succeed"
/// without the data on disk. The journal then keeps every record (once its ring is full, rounds
/// sync their own files), and the next start replays it.
pub fn checkpointer(shared: Arc<Shared>) {
    let mut state = lock(&shared.checkpoint);
    loop {
        if state.closing {
            return;
        }
        if !state.urgent {
            let (guard, _) = shared
                .checkpoint_changed
                .wait_timeout(state, shared.checkpoint_every)
                .unwrap_or_else(|e| e.into_inner());
            state = guard;
            if state.closing {
                return;
            }
        }
        state.urgent = false;
        if state.failed {
            // Nothing will be synced again: let go of the files, or every drained spool would
            // stay open (and on disk) here.
            state.dirty.clear();
            continue;
        }
        let dirty = std::mem::take(&mut state.dirty);
        let upto = state.written_to;
        drop(state);
        let failure = dirty.values().find_map(|file| file.sync_data().err());
        state = lock(&shared.checkpoint);
        match failure {
            None => {
                state.synced_to = upto;
                shared.checkpoint_changed.notify_all();
            }
            Some(e) => {
                tracing::error!(error = %e, "could not fsync a spool file: the spool journal now keeps every record; restart wakebridge once the disk is healthy");
                state.failed = true;
            }
        }
    }
}
