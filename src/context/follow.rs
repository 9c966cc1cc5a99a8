//! Following one session's transcript file (an agent's reader reads its lines), and finding
//! Claude Code's. [`TranscriptFollower`] starts
//! from the file's tail (a window doubling up to a cap until a record decides, so a multi-GB
//! history is never read whole), then reads only appended bytes; it survives truncation,
//! replacement, a partial last line and a file not there yet.

use std::fs::File;
use std::io::ErrorKind;
use std::mem::{replace, take};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::agent::Agent;
use crate::reading::transcript::{ContextReading, ContextTracker, LimitRecord, UsageWindows};

/// First tail window: it holds the last several turns of a typical transcript.
pub const INITIAL_TAIL_BYTES: u64 = 256 * 1024;
/// Largest tail window: past this the file holds no usable record near its end, and reading
/// further back would cost more than waiting for the next turn to append one.
pub const MAX_TAIL_BYTES: u64 = 64 * 1024 * 1024;
/// Longest line kept while waiting for its newline; longer ones (pasted images) are dropped.
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;
/// Bytes read per system call.
const READ_CHUNK_BYTES: usize = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error("cannot read transcript {path}: {source}; check it is readable by this user")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("transcript path {0} is not a regular file; point at the session's .jsonl file")]
    NotAFile(PathBuf),
    #[error(
        "cannot watch {path} for changes: no change notification backend; polling continues \
         instead"
    )]
    NoWatcher { path: PathBuf },
    #[error("cannot watch {path} for changes: {source}; polling continues instead")]
    Watch {
        path: PathBuf,
        source: notify::Error,
    },
}

/// What one `poll()` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollEvent {
    /// The file does not exist (yet, or any more). The last reading is kept.
    Missing,
    Opened,
    /// The path now names a different file (rotated, rewritten via rename): re-tailed.
    Replaced,
    /// The file shrank or was rewritten in place: re-tailed.
    Truncated,
    Appended,
    Unchanged,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollOutcome {
    pub event: PollEvent,
    pub bytes_read: u64,
}

/// Splits a byte stream into lines across reads, bounding the partial line it keeps.
#[derive(Debug, Clone, Default)]
struct LineSplitter {
    partial: Vec<u8>,
    partial_start: u64,
    /// Inside a line whose start was not seen (tail window) or that grew past the bound.
    discarding: bool,
    /// File offset just after the first newline that ended a discarded line: where a tail
    /// window's complete lines begin.
    first_line_end: Option<u64>,
}

impl LineSplitter {
    fn push(&mut self, bytes: &[u8], base: u64, max_line: usize, tracker: &mut ContextTracker) {
        let mut start = 0usize;
        while let Some(rel) = bytes
            .get(start..)
            .and_then(|rest| rest.iter().position(|&b| b == b'\n'))
        {
            let end = start + rel;
            let segment = bytes.get(start..end).unwrap_or_default();
            if self.discarding {
                self.discarding = false;
                if self.first_line_end.is_none() {
                    self.first_line_end = Some(base + end as u64 + 1);
                }
            } else if self.partial.is_empty() {
                tracker.feed_line(segment, base + start as u64);
            } else {
                self.partial.extend_from_slice(segment);
                tracker.feed_line(&self.partial, self.partial_start);
            }
            self.partial.clear();
            start = end + 1;
        }
        let rest = bytes.get(start..).unwrap_or_default();
        if self.discarding || rest.is_empty() {
            return;
        }
        if self.partial.is_empty() {
            self.partial_start = base + start as u64;
        }
        if self.partial.len() + rest.len() > max_line {
            self.partial.clear();
            self.discarding = true;
        } else {
            self.partial.extend_from_slice(rest);
        }
    }

    fn at_line_start(&self) -> bool {
        self.partial.is_empty() && !self.discarding
    }
}

struct OpenFile {
    file: File,
    identity: (u64, u64),
}

pub struct TranscriptFollower {
    path: PathBuf,
    open: Option<OpenFile>,
    /// Next byte of the file to read.
    offset: u64,
    splitter: LineSplitter,
    tracker: ContextTracker,
}

impl std::fmt::Debug for TranscriptFollower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (f.debug_struct("TranscriptFollower"))
            .field("path", &self.path)
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

impl TranscriptFollower {
    /// A follower for `agent`'s transcript at `path`. Nothing is read until `poll()`.
    pub fn new(path: impl Into<PathBuf>, agent: Agent) -> Self {
        let reader = agent.side().transcript_reader();
        Self::reading_with(path, ContextTracker::reading_with(reader))
    }

    /// A follower for the transcript at `path` that `tracker` (fresh) reads.
    pub fn reading_with(path: impl Into<PathBuf>, tracker: ContextTracker) -> Self {
        Self {
            path: path.into(),
            open: None,
            offset: 0,
            splitter: LineSplitter::default(),
            tracker,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn current(&self) -> Option<&ContextReading> {
        self.tracker.current()
    }

    pub fn limit(&self) -> Option<&LimitRecord> {
        self.tracker.limit()
    }

    /// The account's usage windows, where the transcript reports them (Codex's does).
    pub fn windows(&self) -> Option<UsageWindows> {
        self.tracker.windows()
    }

    /// Brings the reading up to date with the file (on every change notification and a timer).
    pub fn poll(&mut self) -> Result<PollOutcome, FollowError> {
        let (event, bytes_read) = self.poll_inner()?;
        Ok(PollOutcome { event, bytes_read })
    }

    fn io_err(&self, source: std::io::Error) -> FollowError {
        FollowError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn poll_inner(&mut self) -> Result<(PollEvent, u64), FollowError> {
        let meta = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                self.open = None;
                return Ok((PollEvent::Missing, 0));
            }
            Err(e) => return Err(self.io_err(e)),
        };
        if !meta.is_file() {
            return Err(FollowError::NotAFile(self.path.clone()));
        }
        let path_identity = (meta.dev(), meta.ino());
        let same_file = self
            .open
            .as_ref()
            .is_some_and(|o| o.identity == path_identity);
        if !same_file {
            let was_open = self.open.is_some();
            let file = File::open(&self.path).map_err(|e| self.io_err(e))?;
            let opened = file.metadata().map_err(|e| self.io_err(e))?;
            self.open = Some(OpenFile {
                file,
                identity: (opened.dev(), opened.ino()),
            });
            let event = match was_open {
                true => PollEvent::Replaced,
                false => PollEvent::Opened,
            };
            return Ok((event, self.retail(opened.len())?));
        }
        let len = (self.open.as_ref())
            .map_or(Ok(0), |o| o.file.metadata().map(|m| m.len()))
            .map_err(|e| self.io_err(e))?;
        if len < self.offset || !self.still_ends_in_newline()? {
            return Ok((PollEvent::Truncated, self.retail(len)?));
        }
        if len == self.offset {
            return Ok((PollEvent::Unchanged, 0));
        }
        Ok((PollEvent::Appended, self.read_appended(len)?))
    }

    /// Cheap check for an in-place rewrite that regrew past our offset: the byte before the
    /// offset was a newline when we consumed it, so it must still be one.
    fn still_ends_in_newline(&self) -> Result<bool, FollowError> {
        let checkable = self.offset > 0 && self.splitter.at_line_start();
        let Some(open) = self.open.as_ref().filter(|_| checkable) else {
            return Ok(true);
        };
        let mut byte = [0u8; 1];
        match open.file.read_at(&mut byte, self.offset - 1) {
            Ok(1) => Ok(byte[0] == b'\n'),
            Ok(_) => Ok(false),
            Err(e) => Err(self.io_err(e)),
        }
    }

    /// Reads `[start, end)` through `splitter` into `tracker`. Returns bytes read; stops early if
    /// the file shrank meanwhile (the next poll notices).
    fn read_range(
        &self,
        start: u64,
        end: u64,
        splitter: &mut LineSplitter,
        tracker: &mut ContextTracker,
    ) -> Result<u64, FollowError> {
        let Some(open) = &self.open else {
            return Ok(0);
        };
        let mut buf = vec![0u8; READ_CHUNK_BYTES.min((end - start) as usize).max(1)];
        let mut pos = start;
        while pos < end {
            let want = ((end - pos) as usize).min(buf.len());
            let chunk = buf.get_mut(..want).unwrap_or_default();
            let n = match open.file.read_at(chunk, pos) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.io_err(e)),
            };
            splitter.push(
                buf.get(..n).unwrap_or_default(),
                pos,
                MAX_LINE_BYTES,
                tracker,
            );
            pos += n as u64;
        }
        Ok(pos - start)
    }

    fn read_appended(&mut self, len: u64) -> Result<u64, FollowError> {
        let fresh = self.tracker.fresh();
        let (mut splitter, mut tracker) =
            (take(&mut self.splitter), replace(&mut self.tracker, fresh));
        let result = self.read_range(self.offset, len, &mut splitter, &mut tracker);
        (self.splitter, self.tracker) = (splitter, tracker);
        let read = result?;
        self.offset += read;
        Ok(read)
    }

    /// Starts over from the tail of a file of `len` bytes: windows of growing size until one
    /// holds a deciding record (with a known model), the start of the file, or the cap. Each
    /// step parses only the bytes before the previous window, so a search costs about the final
    /// window, not the sum of all windows.
    fn retail(&mut self, len: u64) -> Result<u64, FollowError> {
        let mut window = INITIAL_TAIL_BYTES;
        let mut total = 0u64;
        // Bytes from `region_end` to `len` have been parsed into `later`.
        let mut region_end = len;
        let mut later = self.tracker.fresh();
        self.splitter = LineSplitter::default();
        self.offset = len;
        loop {
            let start = len.saturating_sub(window).min(region_end);
            let mut splitter = LineSplitter {
                // Mid-file, the first bytes belong to a line whose start we did not read.
                discarding: start > 0,
                ..LineSplitter::default()
            };
            let mut tracker = self.tracker.fresh();
            let read = self.read_range(start, region_end, &mut splitter, &mut tracker)?;
            total += read;
            if region_end == len {
                // This region ends at the file's end: its unfinished line is the one to keep.
                self.offset = start + read;
                self.splitter = LineSplitter {
                    first_line_end: None,
                    ..splitter.clone()
                };
            }
            later = tracker.followed_by(later);
            if let Some(first_line_end) = splitter.first_line_end {
                region_end = first_line_end;
            }
            let decided = later.current().is_some_and(|r| r.model.is_some());
            if decided || start == 0 || window >= MAX_TAIL_BYTES {
                self.tracker = later;
                return Ok(total);
            }
            window = window.saturating_mul(2).min(MAX_TAIL_BYTES);
        }
    }
}

/// Change notification for transcript directories with a polling fallback.
pub struct ChangeWatcher {
    watcher: Option<notify::RecommendedWatcher>,
    rx: tokio::sync::mpsc::UnboundedReceiver<PathBuf>,
    fallback: Duration,
}

impl ChangeWatcher {
    /// Without a platform backend it degrades to the fallback timer.
    pub fn new(fallback: Duration) -> Self {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            if let Ok(event) = event {
                for path in event.paths {
                    // A closed receiver only means the watcher is being dropped.
                    let _ = tx.send(path);
                }
            }
        })
        .ok();
        Self {
            watcher,
            rx,
            fallback,
        }
    }

    /// Watches one directory, not recursively.
    pub fn watch_dir(&mut self, dir: &Path) -> Result<(), FollowError> {
        use notify::Watcher as _;
        let Some(watcher) = self.watcher.as_mut() else {
            return Err(FollowError::NoWatcher {
                path: dir.to_owned(),
            });
        };
        watcher
            .watch(dir, notify::RecursiveMode::NonRecursive)
            .map_err(|source| FollowError::Watch {
                path: dir.to_owned(),
                source,
            })
    }

    /// Waits for a change or the fallback interval: the changed paths, none on a fallback tick.
    pub async fn next(&mut self) -> Vec<PathBuf> {
        let Ok(Some(first)) = tokio::time::timeout(self.fallback, self.rx.recv()).await else {
            return Vec::new();
        };
        let mut paths = vec![first];
        while let Ok(path) = self.rx.try_recv() {
            paths.push(path);
        }
        paths.sort();
        paths.dedup();
        paths
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitter_keeps_partial_line_until_newline() {
        let mut s = LineSplitter::default();
        let mut t = ContextTracker::reading_with(Agent::Claude.side().transcript_reader());
        let line = br#"{"type":"assistant","message":{"model":"m","usage":{"input_tokens":7}}}"#;
        let (a, b) = line.split_at(20);
        s.push(a, 0, 1024, &mut t);
        assert!(t.current().is_none());
        s.push(b, 20, 1024, &mut t);
        assert!(t.current().is_none(), "no newline yet");
        s.push(b"\n", line.len() as u64, 1024, &mut t);
        assert_eq!(t.current().map(|r| r.used_tokens), Some(7));
        assert_eq!(s.partial_start, 0, "the line is fed at its start");
    }

    #[test]
    fn splitter_drops_overlong_line() {
        let mut s = LineSplitter::default();
        let mut t = ContextTracker::reading_with(Agent::Claude.side().transcript_reader());
        s.push(&[b'x'; 100], 0, 10, &mut t);
        assert!(s.discarding);
        s.push(b"yy\n", 100, 10, &mut t);
        assert!(s.at_line_start());
    }
}
