//! One session's files, as the drain contract expects: `<sid>.lock` flocked before `<sid>.jsonl`
//! is touched, symlinks refused, new files private, a torn tail closed, a failed write cut back.
//! An append is `prepare` (the offset the ledger records) then `write`; nothing here fsyncs.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::SpoolError;
use crate::private_fs;

/// `<wake dir>/<sid>.jsonl`: the session's spool, as the Python bridge names it.
pub fn spool_path(wake_dir: &Path, sid: &str) -> PathBuf {
    wake_dir.join(format!("{sid}.jsonl"))
}

pub fn io_error(sid: &str, path: &Path, e: io::Error) -> SpoolError {
    let (sid, path, message) = (sid.to_string(), path.to_path_buf(), e.to_string());
    match e.kind() {
        io::ErrorKind::StorageFull => SpoolError::NoSpace { sid, path, message },
        kind => SpoolError::Io {
            sid,
            path,
            kind,
            message,
        },
    }
}

/// Tries once to take `<sid>.lock`: `Ok(None)` while someone else (a drainer) holds it. The lock
/// is released when the file is dropped (closing the descriptor drops the flock).
pub fn try_lock(wake_dir: &Path, sid: &str) -> Result<Option<File>, SpoolError> {
    let path = wake_dir.join(format!("{sid}.lock"));
    private_fs::try_lock(&path).map_err(|e| open_error(sid, &path, e))
}

/// A session file ready for an append: where the bytes will go, and how to take them back.
pub struct Prepared {
    pub file: Arc<File>,
    /// `<sid>.jsonl`, for the errors.
    path: PathBuf,
    pub dev: u64,
    pub ino: u64,
    /// The undo point.
    pub before: u64,
    pub offset: u64,
    /// An earlier crash tore the tail: a newline goes first.
    torn_tail: bool,
    /// Its directory entry must be made durable too.
    pub created: bool,
}

/// Opens (creating if needed) `<sid>.jsonl` for an append under the session lock.
pub fn prepare(wake_dir: &Path, sid: &str) -> Result<Prepared, SpoolError> {
    let path = spool_path(wake_dir, sid);
    let open = |create| {
        private_fs::options()
            .read(true)
            .append(true)
            .create_new(create)
            .open(&path)
    };
    let (file, created) = match open(false) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => (open(true), true),
        opened => (opened, false),
    };
    let file = file.map_err(|e| open_error(sid, &path, e))?;
    let meta = file.metadata().map_err(|e| io_error(sid, &path, e))?;
    let before = meta.len();
    // A tail torn by an earlier crash would glue our first line onto it: start fresh.
    let torn_tail = before > 0 && {
        let mut last = [0u8; 1];
        file.read_exact_at(&mut last, before - 1).is_ok() && last[0] != b'\n'
    };
    Ok(Prepared {
        file: Arc::new(file),
        path,
        dev: meta.dev(),
        ino: meta.ino(),
        before,
        offset: before + u64::from(torn_tail),
        torn_tail,
        created,
    })
}

impl Prepared {
    /// Appends `bytes` (whole lines) at `offset`; on failure the file is cut back, so no partial
    /// line is left.
    pub fn write(&self, sid: &str, bytes: &[u8]) -> Result<(), SpoolError> {
        let mut file: &File = &self.file;
        let newline: &[u8] = if self.torn_tail { b"\n" } else { b"" };
        let written = file.write_all(newline).and_then(|()| file.write_all(bytes));
        written.map_err(|e| {
            self.undo();
            io_error(sid, &self.path, e)
        })
    }

    /// Puts the appended bytes on the disk.
    pub fn sync(&self, sid: &str) -> Result<(), SpoolError> {
        self.file
            .sync_data()
            .map_err(|e| io_error(sid, &self.path, e))
    }

    /// Takes the append back, on disk too: a crash cannot bring back part of a refused line.
    pub fn undo(&self) {
        let _ = self.file.set_len(self.before);
        let _ = self.file.sync_data();
    }
}

/// `O_NOFOLLOW` answers a symlink with ELOOP: the spool is refused, its target untouched.
fn open_error(sid: &str, path: &Path, e: io::Error) -> SpoolError {
    if e.raw_os_error() == Some(libc::ELOOP) {
        SpoolError::Symlink(path.to_path_buf())
    } else {
        io_error(sid, path, e)
    }
}

pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}
