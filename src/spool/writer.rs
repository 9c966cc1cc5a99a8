//! The two threads behind `Spool::append`. The writer takes every line queued since its last
//! round; under each session's lock it commits the round to the ledger (synced), writes the
//! lines (page cache), releases the locks and answers. A session a drainer holds is retried
//! every 100 ms until its deadlines pass. The checkpointer fsyncs the files written since its
//! last pass, then drops their pending bytes from the ledger.

use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

use super::SpoolError;
use super::files::{self, Prepared, io_error};
use crate::deadline::Deadline;
use crate::lock;
use crate::store::{Delivery, PendingBytes, RoundIds, SpoolRound, Store};

/// Pause between attempts on a lock a drainer holds (the reference's 0.1 s).
pub(super) const LOCK_RETRY: Duration = Duration::from_millis(100);
/// Most line bytes one round takes (the rest goes in the next, at once): bounds a commit's
/// latency, yet holds the largest line (a 1 MiB body with `\uXXXX` escapes is ~3 MiB).
const ROUND_BYTES: usize = 4 << 20;
/// Most sessions one round takes; the rest wait for the next round.
const ROUND_SESSIONS: usize = 256;

/// The ledger row of an appended line, or `None` when the ledger could not take the round (the
/// line is durable all the same: its file was fsynced instead).
pub type DeliveryId = Option<i64>;

pub struct Pending {
    pub sid: String,
    pub line: String,
    /// Its delivery row, written with the round (the event's identity, a provisional action).
    pub delivery: Delivery,
    pub deadline: Deadline,
    pub done: oneshot::Sender<Result<DeliveryId, SpoolError>>,
}

impl Pending {
    fn answer(self, result: Result<DeliveryId, SpoolError>) {
        let _ = self.done.send(result);
    }
}

#[derive(Default)]
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
    closing: bool,
}

#[derive(Default)]
struct CheckpointState {
    /// Session files written since the checkpointer's last pass, by (device, inode).
    dirty: HashMap<(u64, u64), Arc<File>>,
    /// The newest pending row whose bytes are in `dirty` files (or earlier, synced ones).
    written_to: i64,
    /// A session file failed to sync: pending rows are kept from then on (see `checkpointer`).
    failed: bool,
    closing: bool,
}

impl Shared {
    pub fn new(checkpoint_every: Duration) -> Self {
        Self {
            checkpoint_every,
            ..Self::default()
        }
    }

    /// Queues a line for the next round; `false` (the line dropped) once the spool is closing.
    pub fn push(&self, pending: Pending) -> bool {
        let mut queue = lock(&self.queue);
        if queue.closing {
            return false;
        }
        queue.pending.push(pending);
        self.queued.notify_one();
        true
    }

    pub fn close(&self) {
        lock(&self.queue).closing = true;
        self.queued.notify_one();
    }
}

pub struct Writer {
    shared: Arc<Shared>,
    wake_dir: PathBuf,
    /// The wake dir as the ledger keys its pending rows.
    wake_key: String,
    store: Store,
    /// Lines whose session lock a drainer holds, retried every `LOCK_RETRY` at least.
    deferred: Vec<Pending>,
    /// Lines past a round's byte budget, taken by the very next round.
    carried: Vec<Pending>,
    ledger_failing: bool,
}

/// A session's share of a round: locked, its file prepared, not yet written.
struct Share {
    sid: String,
    pending: Vec<Pending>,
    bytes: Vec<u8>,
    prepared: Prepared,
    /// Held until the round is answered, so a drainer never takes a line that is not durable.
    _lock: File,
}

impl Writer {
    pub fn new(shared: Arc<Shared>, wake_dir: PathBuf, wake_key: String, store: Store) -> Self {
        Self {
            shared,
            wake_dir,
            wake_key,
            store,
            deferred: Vec::new(),
            carried: Vec::new(),
            ledger_failing: false,
        }
    }

    /// Runs rounds until closed and all answered, then lets the checkpointer make its last pass.
    pub fn run(mut self, checkpointer: std::thread::JoinHandle<()>) {
        while let Some(batch) = self.next_batch() {
            self.round(batch);
        }
        lock(&self.shared.checkpoint).closing = true;
        self.shared.checkpoint_changed.notify_all();
        let _ = checkpointer.join();
    }

    /// Waits for new lines or a retry of busy ones; `None` once closing and nothing is left.
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
            // Closing with lines still waiting for a drainer: retry them at the usual pace.
            let wait = if self.deferred.is_empty() {
                self.shared.checkpoint_every
            } else {
                LOCK_RETRY
            };
            let (guard, timeout) = self
                .shared
                .queued
                .wait_timeout(queue, wait)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            queue = guard;
            if timeout.timed_out() && !self.deferred.is_empty() {
                return Some(std::mem::take(&mut self.deferred));
            }
        }
    }

    fn round(&mut self, batch: Vec<Pending>) {
        let shares = self.take_shares(batch);
        if shares.is_empty() {
            return;
        }
        // A new file's directory entry is durable before the ledger names it.
        if shares.iter().any(|s| s.prepared.created)
            && let Err(e) = files::sync_dir(&self.wake_dir)
        {
            let e = io_error(&shares[0].sid, &self.wake_dir, e);
            for share in shares {
                share.prepared.undo();
                answer_all(share.pending, &Err(e.clone()));
            }
            return;
        }
        match self.store.commit_round(self.round_record(&shares)) {
            Ok(ids) => {
                if self.ledger_failing {
                    tracing::info!("the ledger records spool rounds again");
                    self.ledger_failing = false;
                }
                self.write_recorded(shares, ids);
            }
            Err(e) => {
                if !self.ledger_failing {
                    tracing::warn!(error = %e, "the ledger cannot record spool rounds; syncing session files one by one until it can (a redelivery after a crash may then be spooled twice)");
                    self.ledger_failing = true;
                }
                self.write_synced(shares);
            }
        }
    }

    /// Takes each session's lock and prepares its file, within the round's budgets.
    fn take_shares(&mut self, batch: Vec<Pending>) -> Vec<Share> {
        let mut shares = Vec::new();
        let mut room = ROUND_BYTES;
        let mut recreated_dir = false;
        for (sid, mut group) in by_session(batch) {
            // Each session in the round holds two descriptors until it is answered.
            if room == 0 || shares.len() >= ROUND_SESSIONS {
                self.carried.extend(group);
                continue;
            }
            // The lock first: if a drainer holds it, every line of the session waits, in order.
            let lock = match self.lock_session(&sid, &mut recreated_dir) {
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
            match files::prepare(&self.wake_dir, &sid) {
                Ok(prepared) => {
                    let bytes: Vec<u8> = group.iter().flat_map(|p| p.line.bytes()).collect();
                    room = room.saturating_sub(bytes.len());
                    shares.push(Share {
                        sid,
                        pending: group,
                        bytes,
                        prepared,
                        _lock: lock,
                    });
                }
                Err(e) => answer_all(group, &Err(e)),
            }
        }
        shares
    }

    fn round_record(&self, shares: &[Share]) -> SpoolRound {
        let sessions = shares
            .iter()
            .map(|s| {
                let pending = PendingBytes {
                    session_id: s.sid.clone(),
                    inode: s.prepared.ino,
                    offset: s.prepared.offset,
                    bytes: s.bytes.clone(),
                };
                (
                    pending,
                    s.pending.iter().map(|p| p.delivery.clone()).collect(),
                )
            })
            .collect();
        SpoolRound {
            wake_dir: self.wake_key.clone(),
            sessions,
        }
    }

    /// Writes each share of a recorded round and answers with its rows; a share that cannot be
    /// written is cut back and taken out of the ledger.
    fn write_recorded(&self, shares: Vec<Share>, ids: Vec<RoundIds>) {
        let mut written_to = None;
        for (share, ids) in shares.into_iter().zip(ids) {
            let prepared = &share.prepared;
            match prepared.write(&share.sid, &share.bytes) {
                Ok(()) => {
                    written_to = written_to.max(Some(ids.pending));
                    lock(&self.shared.checkpoint)
                        .dirty
                        .entry((prepared.dev, prepared.ino))
                        .or_insert_with(|| prepared.file.clone());
                    for (p, id) in share.pending.into_iter().zip(ids.deliveries) {
                        p.answer(Ok(Some(id)));
                    }
                }
                Err(e) => {
                    if let Err(forget) = self.store.forget_share(&share.sid, ids) {
                        tracing::warn!(error = %forget, session_id = %share.sid, "could not take a refused spool append out of the ledger; a restart may add its lines after all");
                    }
                    answer_all(share.pending, &Err(e));
                }
            }
        }
        if let Some(upto) = written_to {
            let mut checkpoint = lock(&self.shared.checkpoint);
            checkpoint.written_to = checkpoint.written_to.max(upto);
        }
    }

    /// The ledger could not take the round: each share is written and fsynced by itself.
    fn write_synced(&self, shares: Vec<Share>) {
        for share in shares {
            let prepared = &share.prepared;
            // A failed write takes itself back; a failed sync is taken back here.
            let written = prepared.write(&share.sid, &share.bytes).and_then(|()| {
                let synced = prepared.sync(&share.sid);
                synced.inspect_err(|_| prepared.undo())
            });
            answer_all(share.pending, &written.map(|()| None));
        }
    }

    /// Takes `<sid>.lock` once; a vanished wake dir is recreated once per round.
    fn lock_session(
        &self,
        sid: &str,
        recreated_dir: &mut bool,
    ) -> Result<Option<File>, SpoolError> {
        match files::try_lock(&self.wake_dir, sid) {
            Err(SpoolError::Io {
                kind: std::io::ErrorKind::NotFound,
                ..
            }) if !*recreated_dir => {
                *recreated_dir = true;
                crate::wakedir::ensure_wake_dir(&self.wake_dir)
                    .map_err(|e| io_error(sid, &self.wake_dir, e))?;
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
}

fn answer_all(group: Vec<Pending>, result: &Result<DeliveryId, SpoolError>) {
    for p in group {
        p.answer(result.clone());
    }
}

/// Groups a batch by session, in order of arrival. Indexed: a backlog after a stalled round
/// may hold thousands of sessions, and this runs on every round.
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

/// The checkpointer thread: syncs the files the writer dirtied, then drops their pending bytes
/// from the ledger. After a failed sync, pending rows are kept for the life of the process:
/// Linux marks the pages clean after a failed writeback, so a retry could "succeed" without
/// the data on disk; the next start replays them.
pub fn checkpointer(shared: Arc<Shared>, store: Store, wake_key: String) {
    let mut state = lock(&shared.checkpoint);
    loop {
        if !state.closing {
            state = shared
                .checkpoint_changed
                .wait_timeout(state, shared.checkpoint_every)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        // Closing: one last pass even with nothing dirty, so a failed clear is retried.
        let closing = state.closing;
        if state.failed {
            // Nothing is synced again: let go of the files, or drained spools stay on disk.
            state.dirty.clear();
        } else if closing || !state.dirty.is_empty() {
            let dirty = std::mem::take(&mut state.dirty);
            let upto = state.written_to;
            drop(state);
            match dirty.values().find_map(|file| file.sync_data().err()) {
                None => {
                    if let Err(e) = store.spool_synced(&wake_key, upto) {
                        tracing::warn!(error = %e, "could not clear synced spool rows from the ledger; will retry (at the latest, the next start re-checks them)");
                    }
                }
                Some(e) => {
                    tracing::error!(error = %e, "could not fsync a spool file: the ledger now keeps every spool round until a restart replays it; restart wakebridge once the disk is healthy");
                    lock(&shared.checkpoint).failed = true;
                }
            }
            state = lock(&shared.checkpoint);
        }
        if closing {
            return;
        }
    }
}
