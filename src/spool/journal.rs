//! The spool's write-ahead journal, `<wake_dir>/.wakebridge-journal`: what makes a spooled line
//! durable before its 200 without an fsync per session file.
//!
//! A round of appends (lines for any number of sessions) is written to the session files in the
//! page cache, then described here — one record per session: which file (device, inode), at what
//! offset, which bytes — and this one file is fdatasync'ed. The session files are fsynced later,
//! in the background (a checkpoint), after which their records are no longer needed. After a host
//! crash, `recover` hands back every record past the last checkpoint so the caller can put back
//! whatever the crash took from the session files.
//!
//! The file is a ring: two header slots (written alternately, each in its own block, so a torn
//! header write leaves the other intact) hold the position of the oldest record still needed
//! (`head`); records follow in a fixed-size data area addressed by an ever-growing log sequence
//! number (`lsn`, the byte position as if the ring were unrolled). Each record carries its own
//! lsn, the CRC of the record before it and a CRC of its own, so a scan stops cleanly at a torn
//! record, at a record left from an earlier lap, and at records of a round whose write failed
//! (the next round overwrote the start of it, and its later records no longer chain on). A round
//! number, different for every attempt, keeps a retried round that happens to be byte-identical
//! to a failed one from chaining onto the failed one's leftovers. After the first lap every commit rewrites blocks the file already has, which on this
//! disk is one write instead of two (no size change to persist).

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The journal's name inside the wake dir. Drainers look only at `<sid>.jsonl*`; the leading dot
/// keeps it out of `ls` and globs.
pub const FILE_NAME: &str = ".wakebridge-journal";
/// Bytes of records the ring holds. Bounds the journal's size on disk and how much a recovery
/// scans; the largest possible line (a 1 MiB body re-serialised with `\uXXXX` escapes, ~3 MiB)
/// fits several times.
pub const CAPACITY: u64 = 16 << 20;

const MAGIC: &[u8; 8] = b"WBJRNL\0\x01";
const VERSION: u32 = 1;
/// Each header slot sits in its own 4 KiB block.
const SLOT: u64 = 4096;
const DATA_START: u64 = 2 * SLOT;
const HEADER_LEN: usize = 44;

const RECORD_MAGIC: u32 = 0x5742_5231; // "WBR1"
const RECORD_HEADER: u64 = 40;
const KIND_LINES: u8 = 1;
/// "The rest of this lap is unused; continue at the start of the data area."
const KIND_WRAP: u8 = 2;

/// One session's share of a round: `bytes` were written to the file `(dev, ino)` at `offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub sid: String,
    pub dev: u64,
    pub ino: u64,
    pub offset: u64,
    pub bytes: Vec<u8>,
}

/// Why the journal could not be used.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error(
        "{} is held by another process (a second wakebridge on this wake dir?); stop it, or give this one another --wake-dir",
        .0.display()
    )]
    Busy(PathBuf),
    #[error("spool journal {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("{0} bytes of spool lines for one session exceed the journal ({CAPACITY} bytes)")]
    TooLarge(u64),
    #[error(
        "the spool journal is full: the background fsync of session files has not caught up (or has failed: see the error logged then)"
    )]
    Full,
}

/// The open, exclusively locked journal. Owned by the spool writer thread.
pub struct Journal {
    file: File,
    path: PathBuf,
    /// Oldest lsn still needed (its records' files are not yet known to be synced).
    head: u64,
    /// Where the next record goes.
    tail: u64,
    /// Counter of header writes; picks the slot and the newest header at recovery.
    seq: u64,
    /// This append's round number (see the module doc); starts from the clock at each open.
    round: u64,
    /// CRC of the last record made durable: the next record's `prev`.
    last_crc: u32,
    scratch: Vec<u8>,
}

/// What `open` found: the journal, ready for appends after `tail`, and the records a crash may
/// have cut short (empty after a clean shutdown).
pub struct Opened {
    pub journal: Journal,
    pub pending: Vec<Entry>,
    /// Set when an unreadable journal was moved aside (its name) and a fresh one started.
    pub set_aside: Option<PathBuf>,
}

impl Journal {
    /// Opens (creating if needed) and locks the journal in `dir`, and reads back the records past
    /// its last checkpoint. Nothing is replayed here: the caller does that, then `checkpoint`s.
    pub fn open(dir: &Path) -> Result<Opened, JournalError> {
        let path = dir.join(FILE_NAME);
        let file = open_locked(&path)?;
        let io = |source| JournalError::Io {
            path: path.clone(),
            source,
        };
        let len = file.metadata().map_err(io)?.len();
        if len == 0 {
            return Ok(Opened {
                journal: Self::create(file, path, 0)?,
                pending: Vec::new(),
                set_aside: None,
            });
        }
        let Some(header) = read_header(&file).map_err(io)? else {
            // Not ours or torn beyond both slots: keep it for a human, start afresh.
            let aside = path.with_extension(format!("unreadable-{}", std::process::id()));
            std::fs::rename(&path, &aside).map_err(io)?;
            drop(file);
            let fresh = open_locked(&path)?;
            return Ok(Opened {
                journal: Self::create(fresh, path, 0)?,
                pending: Vec::new(),
                set_aside: Some(aside),
            });
        };
        let (pending, tail, last_crc) = scan(&file, header.head).map_err(io)?;
        Ok(Opened {
            journal: Journal {
                file,
                path,
                head: header.head,
                tail,
                seq: header.seq,
                round: first_round(),
                last_crc,
                scratch: Vec::new(),
            },
            pending,
            set_aside: None,
        })
    }

    /// Starts a new, empty journal in `dir` whose records continue at `tail` (the old file was
    /// unlinked with its directory).
    pub fn open_fresh(dir: &Path, tail: u64) -> Result<Journal, JournalError> {
        let path = dir.join(FILE_NAME);
        let file = open_locked(&path)?;
        file.set_len(0).map_err(|source| JournalError::Io {
            path: path.clone(),
            source,
        })?;
        Self::create(file, path, tail)
    }

    fn create(file: File, path: PathBuf, tail: u64) -> Result<Journal, JournalError> {
        let mut journal = Journal {
            file,
            path,
            head: tail,
            tail,
            seq: 0,
            round: first_round(),
            last_crc: 0,
            scratch: Vec::new(),
        };
        journal.checkpoint(tail)?;
        // The new name must survive a crash too, or the records written into it would not.
        if let Some(dir) = journal.path.parent() {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|source| journal.io(source))?;
        }
        Ok(journal)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The oldest lsn still needed.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// The lsn the next record gets; every record before it is written (and, after `append`
    /// returned, durable).
    pub fn tail(&self) -> u64 {
        self.tail
    }

    /// True once the file is no longer at its path (the wake dir removed or moved by hand): a
    /// restart would not find records written to it, so the caller opens a new one.
    pub fn lost(&self) -> bool {
        let here = std::fs::symlink_metadata(&self.path);
        let ours = self.file.metadata();
        !matches!((here, ours), (Ok(h), Ok(o)) if (h.dev(), h.ino()) == (o.dev(), o.ino()))
    }

    /// Bytes `entries` would occupy from the current tail, wrap padding included.
    pub fn space_for(&self, entries: &[Entry]) -> Result<u64, JournalError> {
        let mut at = self.tail;
        for e in entries {
            let size = record_size(e);
            if size > CAPACITY {
                return Err(JournalError::TooLarge(e.bytes.len() as u64));
            }
            at = place(at, size);
        }
        Ok(at - self.tail)
    }

    /// Whether `needed` more bytes fit without overwriting records not yet checkpointed.
    pub fn fits(&self, needed: u64) -> bool {
        self.tail + needed - self.head <= CAPACITY
    }

    /// Writes `entries` and makes them durable (one fdatasync). The caller checked `fits`. On
    /// error nothing is acknowledged and the tail does not move, so the next round overwrites
    /// whatever partial record this one left (its lsn or CRC would not match anyway).
    pub fn append(&mut self, entries: &[Entry]) -> Result<(), JournalError> {
        let result = self.write_round(entries);
        if result.is_err() {
            // Whatever of the round reached the file chains onto the last good record, so a
            // later scan would take it for part of the log and put back lines whose requests
            // were refused. Break it at its first record (best effort: the disk may be gone).
            let _ = self
                .file
                .write_all_at(&[0; RECORD_HEADER as usize], physical(self.tail));
            let _ = self.file.sync_data();
        }
        result
    }

    fn write_round(&mut self, entries: &[Entry]) -> Result<(), JournalError> {
        let round = self.round;
        // Every attempt gets its own number, failed ones included.
        self.round = self.round.wrapping_add(1);
        let mut at = self.tail;
        let mut run_start = at;
        let mut prev = self.last_crc;
        self.scratch.clear();
        let mut payload = Vec::new();
        for e in entries {
            let size = record_size(e);
            let placed = place(at, size);
            if placed - size != at {
                // Not enough room left in this lap: mark the gap (if a header fits), write the
                // run so far, and start a new run at the beginning of the data area.
                if lap_remaining(at) >= RECORD_HEADER {
                    let marker = Record {
                        lsn: at,
                        kind: KIND_WRAP,
                        round,
                        prev,
                    };
                    prev = marker.encode(&mut self.scratch, &[]);
                }
                self.write_run(run_start)?;
                at = placed - size;
                run_start = at;
            }
            payload.clear();
            encode_entry(&mut payload, e);
            let record = Record {
                lsn: at,
                kind: KIND_LINES,
                round,
                prev,
            };
            prev = record.encode(&mut self.scratch, &payload);
            at = placed;
        }
        self.write_run(run_start)?;
        self.file.sync_data().map_err(|e| self.io(e))?;
        self.tail = at;
        self.last_crc = prev;
        Ok(())
    }

    fn write_run(&mut self, lsn: u64) -> Result<(), JournalError> {
        if !self.scratch.is_empty() {
            let result = self.file.write_all_at(&self.scratch, physical(lsn));
            self.scratch.clear();
            result.map_err(|e| self.io(e))?;
        }
        Ok(())
    }

    /// Records that every record before `head` is no longer needed (their session files are
    /// synced) and makes that durable, freeing their space in the ring.
    pub fn checkpoint(&mut self, head: u64) -> Result<(), JournalError> {
        let seq = self.seq + 1;
        let header = encode_header(head, seq);
        self.file
            .write_all_at(&header, (seq % 2) * SLOT)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| self.io(e))?;
        self.seq = seq;
        self.head = head;
        Ok(())
    }

    fn io(&self, source: io::Error) -> JournalError {
        JournalError::Io {
            path: self.path.clone(),
            source,
        }
    }
}

fn open_locked(path: &Path) -> Result<File, JournalError> {
    let io = |source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(io)?;
    // A process forked by another thread of the previous owner in this process (a tmux or ps
    // call) holds a copy of its descriptor, and so the lock, until its exec: give that a moment.
    let deadline = std::time::Instant::now() + BUSY_PATIENCE;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(TryLockError::WouldBlock) => return Err(JournalError::Busy(path.to_path_buf())),
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
    }
}

/// How long opening waits for the journal's lock before calling it owned by someone else.
const BUSY_PATIENCE: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether one session's `len` bytes of lines fit in a record at all.
pub fn holds(len: usize) -> bool {
    RECORD_HEADER + 2 + 64 + 24 + len as u64 <= CAPACITY
}

fn physical(lsn: u64) -> u64 {
    DATA_START + lsn % CAPACITY
}

fn lap_remaining(lsn: u64) -> u64 {
    CAPACITY - lsn % CAPACITY
}

/// Where a record of `size` bytes starting no earlier than `at` ends: at `at + size`, or, when
/// it would cross the end of the lap, at the start of the next lap plus `size`.
fn place(at: u64, size: u64) -> u64 {
    if size <= lap_remaining(at) {
        at + size
    } else {
        at + lap_remaining(at) + size
    }
}

fn record_size(e: &Entry) -> u64 {
    let payload = 2 + e.sid.len() + 24 + e.bytes.len();
    (RECORD_HEADER + payload as u64).next_multiple_of(8)
}

fn encode_entry(out: &mut Vec<u8>, e: &Entry) {
    // Session ids are at most 64 ASCII characters (checked before anything is spooled).
    out.extend_from_slice(&(e.sid.len() as u16).to_le_bytes());
    out.extend_from_slice(e.sid.as_bytes());
    out.extend_from_slice(&e.dev.to_le_bytes());
    out.extend_from_slice(&e.ino.to_le_bytes());
    out.extend_from_slice(&e.offset.to_le_bytes());
    out.extend_from_slice(&e.bytes);
}

fn decode_entry(payload: &[u8]) -> Option<Entry> {
    let sid_len = usize::from(u16::from_le_bytes(payload.get(..2)?.try_into().ok()?));
    let sid = std::str::from_utf8(payload.get(2..2 + sid_len)?).ok()?;
    let rest = payload.get(2 + sid_len..)?;
    let word = |i: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            rest.get(i * 8..i * 8 + 8)?.try_into().ok()?,
        ))
    };
    Some(Entry {
        sid: sid.to_string(),
        dev: word(0)?,
        ino: word(1)?,
        offset: word(2)?,
        bytes: rest.get(24..)?.to_vec(),
    })
}

/// A record's header fields. Layout: magic u32 | kind u8 | 3 zero bytes | payload length u32 |
/// lsn u64 | crc u32 | prev u32 | round u64 | 4 zero bytes | payload | zero padding to a
/// multiple of 8. The CRC covers the header (with the CRC field zero) and the payload.
struct Record {
    lsn: u64,
    kind: u8,
    round: u64,
    prev: u32,
}

impl Record {
    /// Appends the encoded record to `out`; returns its CRC.
    fn encode(&self, out: &mut Vec<u8>, payload: &[u8]) -> u32 {
        let start = out.len();
        out.extend_from_slice(&RECORD_MAGIC.to_le_bytes());
        out.extend_from_slice(&[self.kind, 0, 0, 0]);
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.lsn.to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&self.prev.to_le_bytes());
        out.extend_from_slice(&self.round.to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(payload);
        let crc = crc32fast::hash(&out[start..]);
        out[start + 20..start + 24].copy_from_slice(&crc.to_le_bytes());
        let padded = start + ((out.len() - start) as u64).next_multiple_of(8) as usize;
        out.resize(padded, 0);
        crc
    }
}

/// A record read back: kind, payload, bytes it occupies, its CRC and its `prev`.
struct ReadRecord {
    kind: u8,
    payload: Vec<u8>,
    size: u64,
    crc: u32,
    prev: u32,
}

/// Reads the record at `lsn`, or `None` where the valid log ends.
fn read_record(file: &File, lsn: u64) -> io::Result<Option<ReadRecord>> {
    let mut header = [0u8; RECORD_HEADER as usize];
    if !read_exact_or_eof(file, &mut header, physical(lsn))? {
        return Ok(None);
    }
    let u32_at = |i: usize| u32::from_le_bytes(header[i..i + 4].try_into().expect("4 bytes"));
    let kind = header[4];
    let len = u64::from(u32_at(8));
    let stored_lsn = u64::from_le_bytes(header[12..20].try_into().expect("8 bytes"));
    let size = (RECORD_HEADER + len).next_multiple_of(8);
    if u32_at(0) != RECORD_MAGIC
        || stored_lsn != lsn
        || !matches!(kind, KIND_LINES | KIND_WRAP)
        || size > lap_remaining(lsn)
    {
        return Ok(None);
    }
    let mut payload = vec![0u8; len as usize];
    if !read_exact_or_eof(file, &mut payload, physical(lsn) + RECORD_HEADER)? {
        return Ok(None);
    }
    let stored_crc = u32_at(20);
    let prev = u32_at(24);
    header[20..24].fill(0);
    let mut crc = crc32fast::Hasher::new();
    crc.update(&header);
    crc.update(&payload);
    Ok((crc.finalize() == stored_crc).then_some(ReadRecord {
        kind,
        payload,
        size,
        crc: stored_crc,
        prev,
    }))
}

/// Every record from `head` on, the lsn after the last one, and the last one's CRC.
fn scan(file: &File, head: u64) -> io::Result<(Vec<Entry>, u64, u32)> {
    let mut entries = Vec::new();
    let mut at = head;
    let mut last_crc = None;
    loop {
        if lap_remaining(at) < RECORD_HEADER {
            at += lap_remaining(at);
        }
        if at - head >= CAPACITY {
            break;
        }
        let Some(record) = read_record(file, at)? else {
            break;
        };
        // The first record after the head starts the chain; every later one must continue it.
        if last_crc.is_some_and(|crc| crc != record.prev) {
            break;
        }
        if record.kind == KIND_WRAP {
            at += lap_remaining(at);
        } else {
            let Some(entry) = decode_entry(&record.payload) else {
                break;
            };
            entries.push(entry);
            at += record.size;
        }
        last_crc = Some(record.crc);
    }
    Ok((entries, at, last_crc.unwrap_or(0)))
}

/// A round number no earlier run used: the clock, in nanoseconds.
fn first_round() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}

fn read_exact_or_eof(file: &File, buf: &mut [u8], offset: u64) -> io::Result<bool> {
    match file.read_exact_at(buf, offset) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

struct Header {
    head: u64,
    seq: u64,
}

fn encode_header(head: u64, seq: u64) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&CAPACITY.to_le_bytes());
    h[24..32].copy_from_slice(&head.to_le_bytes());
    h[32..40].copy_from_slice(&seq.to_le_bytes());
    let crc = crc32fast::hash(&h[..40]);
    h[40..44].copy_from_slice(&crc.to_le_bytes());
    h
}

/// The newer of the two valid header slots, if any is valid.
fn read_header(file: &File) -> io::Result<Option<Header>> {
    let mut best: Option<Header> = None;
    for slot in 0..2 {
        let mut h = [0u8; HEADER_LEN];
        if !read_exact_or_eof(file, &mut h, slot * SLOT)? {
            continue;
        }
        let word = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().expect("8 bytes"));
        let valid = &h[..8] == MAGIC
            && h[8..12] == VERSION.to_le_bytes()
            && word(16) == CAPACITY
            && h[40..44] == crc32fast::hash(&h[..40]).to_le_bytes();
        if valid && best.as_ref().is_none_or(|b| word(32) > b.seq) {
            best = Some(Header {
                head: word(24),
                seq: word(32),
            });
        }
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(sid: &str, offset: u64, text: &str) -> Entry {
        Entry {
            sid: sid.into(),
            dev: 7,
            ino: 42,
            offset,
            bytes: text.as_bytes().to_vec(),
        }
    }

    #[test]
    fn records_survive_reopening_until_checkpointed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut opened = Journal::open(dir.path()).expect("open");
        assert!(opened.pending.is_empty());
        let batch = [entry("a", 0, "{\"x\": 1}\n"), entry("b", 9, "{\"y\": 2}\n")];
        opened.journal.append(&batch).expect("append");
        let tail = opened.journal.tail();
        drop(opened);

        let mut reopened = Journal::open(dir.path()).expect("reopen");
        assert_eq!(reopened.pending, batch);
        assert_eq!(reopened.journal.tail(), tail);
        reopened.journal.checkpoint(tail).expect("checkpoint");
        drop(reopened);
        assert!(Journal::open(dir.path()).expect("again").pending.is_empty());
    }

    #[test]
    fn a_second_owner_is_refused_by_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        let _first = Journal::open(dir.path()).expect("open");
        let err = Journal::open(dir.path()).err().expect("refused");
        assert!(matches!(err, JournalError::Busy(_)));
        assert!(err.to_string().contains(FILE_NAME), "{err}");
    }

    #[test]
    fn a_torn_last_record_ends_the_log_without_losing_earlier_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut opened = Journal::open(dir.path()).expect("open");
        opened.journal.append(&[entry("a", 0, "one\n")]).expect("1");
        let torn_at = physical(opened.journal.tail());
        opened.journal.append(&[entry("a", 4, "two\n")]).expect("2");
        // Flip a payload byte of the second record, as a write cut short by a crash would.
        let file = OpenOptions::new()
            .write(true)
            .open(dir.path().join(FILE_NAME))
            .expect("raw");
        file.write_all_at(b"X", torn_at + RECORD_HEADER + 3)
            .expect("tear");
        drop(opened);
        let reopened = Journal::open(dir.path()).expect("reopen");
        assert_eq!(reopened.pending, [entry("a", 0, "one\n")]);
    }

    #[test]
    fn records_of_a_failed_round_are_never_replayed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut opened = Journal::open(dir.path()).expect("open");
        opened.journal.append(&[entry("a", 0, "one\n")]).expect("1");
        // A round whose records reached the file but whose fsync failed: `append` returns the
        // error with the tail and chain where they were, and its requests were refused.
        let (tail, last_crc) = (opened.journal.tail, opened.journal.last_crc);
        let failed = [entry("b", 0, "refused-1\n"), entry("c", 0, "refused-2\n")];
        opened.journal.append(&failed).expect("written");
        (opened.journal.tail, opened.journal.last_crc) = (tail, last_crc);
        // The bus retries the first one: a byte-identical record at the same place.
        opened.journal.append(&failed[..1]).expect("retry");
        drop(opened);
        let reopened = Journal::open(dir.path()).expect("reopen");
        assert_eq!(
            reopened.pending,
            [entry("a", 0, "one\n"), entry("b", 0, "refused-1\n")],
            "the failed round's second record must not come back"
        );
    }

    #[test]
    fn a_round_that_failed_at_the_tail_is_cut_off_for_a_later_scan() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut opened = Journal::open(dir.path()).expect("open");
        opened.journal.append(&[entry("a", 0, "one\n")]).expect("1");
        // A round whose records reached the file but whose fsync failed, with nothing after it.
        let (tail, last_crc) = (opened.journal.tail, opened.journal.last_crc);
        opened
            .journal
            .write_round(&[entry("b", 0, "refused\n")])
            .expect("written");
        (opened.journal.tail, opened.journal.last_crc) = (tail, last_crc);
        // What `append` does on the way out of a failure.
        opened
            .journal
            .file
            .write_all_at(&[0; RECORD_HEADER as usize], physical(tail))
            .expect("cut");
        drop(opened);
        let reopened = Journal::open(dir.path()).expect("reopen");
        assert_eq!(reopened.pending, [entry("a", 0, "one\n")]);
    }

    #[test]
    fn the_ring_wraps_and_never_replays_a_previous_lap() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut opened = Journal::open(dir.path()).expect("open");
        let big = "z".repeat(3 << 20);
        let mut last = Vec::new();
        // Six laps' worth of 3 MiB records, checkpointing as a real writer would.
        for i in 0..30u64 {
            let batch = [entry("s", i, &big)];
            let needed = opened.journal.space_for(&batch).expect("size");
            if !opened.journal.fits(needed) {
                let tail = opened.journal.tail();
                opened.journal.checkpoint(tail).expect("checkpoint");
            }
            assert!(opened.journal.fits(needed));
            opened.journal.append(&batch).expect("append");
            last = batch.to_vec();
            if i == 28 {
                let tail = opened.journal.tail();
                opened.journal.checkpoint(tail).expect("checkpoint");
            }
        }
        assert!(opened.journal.tail() > 5 * CAPACITY);
        drop(opened);
        let reopened = Journal::open(dir.path()).expect("reopen");
        assert_eq!(
            reopened.pending, last,
            "only the record after the checkpoint"
        );
        let len = std::fs::metadata(dir.path().join(FILE_NAME))
            .expect("stat")
            .len();
        assert!(
            len <= DATA_START + CAPACITY,
            "the file never outgrows the ring: {len}"
        );
    }

    #[test]
    fn an_unreadable_journal_is_moved_aside_not_lost() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(FILE_NAME), b"not a journal at all").expect("seed");
        let opened = Journal::open(dir.path()).expect("open");
        let aside = opened.set_aside.expect("moved aside");
        assert_eq!(
            std::fs::read(&aside).expect("kept"),
            b"not a journal at all"
        );
        assert!(opened.pending.is_empty());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Whatever a crash or a stray write leaves in the data area, opening reads what is
        /// valid and stops: no panic, no huge allocation, no record out of thin air.
        #[test]
        fn garbage_after_valid_records_never_panics(
            garbage in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..4096),
            at in 0u64..256,
        ) {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut opened = Journal::open(dir.path()).expect("open");
            opened.journal.append(&[entry("a", 0, "one\n")]).expect("append");
            let end = physical(opened.journal.tail());
            drop(opened);
            let file = OpenOptions::new()
                .write(true)
                .open(dir.path().join(FILE_NAME))
                .expect("raw");
            file.write_all_at(&garbage, end + at)
                .unwrap_or_else(|e| panic!("scribbling at {}: {e}", end + at));
            let reopened = Journal::open(dir.path()).expect("reopen");
            proptest::prop_assert_eq!(reopened.pending, vec![entry("a", 0, "one\n")]);
        }
    }

    #[test]
    fn a_line_larger_than_the_ring_is_refused_before_writing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let opened = Journal::open(dir.path()).expect("open");
        let huge = entry("s", 0, &"h".repeat(CAPACITY as usize));
        assert!(matches!(
            opened.journal.space_for(&[huge]),
            Err(JournalError::TooLarge(_))
        ));
    }
}
