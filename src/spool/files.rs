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

/// A held `<sid>.lock`; released when dropped (closing the descriptor drops the flock).
pub struct SessionLock(#[allow(dead_code)] File);

/// Tries once to take `<sid>.lock`: `Ok(None)` while someone else (a drainer) holds it.
pub fn try_lock(wake_dir: &Path, sid: &str) -> Result<Option<SessionLock>, SpoolError> {
    let path = wake_dir.join(format!("{sid}.lock"));
    private_fs::try_lock(&path)
        .map(|held| held.map(SessionLock))
        .map_err(|e| open_error(sid, &path, e))
}

#[derive(Clone)]
pub struct OpenSpool {
    pub file: Arc<File>,
    pub dev: u64,
    pub ino: u64,
    /// Where our last write ended: if the file still has this length, its tail is ours and whole.
    pub end: u64,
}

/// A session file ready for an append: where the bytes will go, and how to take them back.
pub struct Prepared {
    pub spool: OpenSpool,
    /// The undo point.
    pub before: u64,
    pub offset: u64,
    /// An earlier crash tore the tail: a newline goes first.
    torn_tail: bool,
    /// Its directory entry must be made durable too.
    pub created: bool,
}

/// Opens (creating if needed) `<sid>.jsonl` for an append under the session lock. `cached`, the
/// session's last file, is reused while the path still names it (a drainer renames it away).
pub fn prepare(
    wake_dir: &Path,
    sid: &str,
    cached: Option<&OpenSpool>,
) -> Result<Prepared, SpoolError> {
    let path = spool_path(wake_dir, sid);
    let (spool, before, created) = match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.file_type().is_symlink() => return Err(SpoolError::Symlink(path)),
        Ok(meta) => match cached {
            Some(c) if (c.dev, c.ino) == (meta.dev(), meta.ino()) => (c.clone(), meta.len(), false),
            _ => (open(&path, sid, false)?, meta.len(), false),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => (open(&path, sid, true)?, 0, true),
        Err(e) => return Err(io_error(sid, &path, e)),
    };
    // A tail torn by an earlier crash would glue our first line onto it: start fresh.
    let torn_tail = before > 0 && before != spool.end && {
        let mut last = [0u8; 1];
        spool.file.read_exact_at(&mut last, before - 1).is_ok() && last[0] != b'\n'
    };
    Ok(Prepared {
        spool,
        before,
        offset: before + u64::from(torn_tail),
        torn_tail,
        created,
    })
}

impl Prepared {
    /// Appends `bytes` (whole lines) at `offset`; on failure the file is cut back, so no partial
    /// line is left. Returns the file with its new end.
    pub fn write(&self, wake_dir: &Path, sid: &str, bytes: &[u8]) -> Result<OpenSpool, SpoolError> {
        let mut file: &File = &self.spool.file;
        let newline: &[u8] = if self.torn_tail { b"\n" } else { b"" };
        let written = file.write_all(newline).and_then(|()| file.write_all(bytes));
        if let Err(e) = written {
            self.undo();
            return Err(io_error(sid, &spool_path(wake_dir, sid), e));
        }
        Ok(OpenSpool {
            end: self.offset + bytes.len() as u64,
            ..self.spool.clone()
        })
    }

    /// Takes the append back, on disk too: a crash cannot bring back part of a refused line.
    pub fn undo(&self) {
        let _ = self.spool.file.set_len(self.before);
        let _ = self.spool.file.sync_data();
    }
}

/// Opens `path` for appending; `create`: a new file, which must not exist yet.
fn open(path: &Path, sid: &str, create: bool) -> Result<OpenSpool, SpoolError> {
    let file = private_fs::options()
        .read(true)
        .append(true)
        .create_new(create)
        .open(path)
        .map_err(|e| open_error(sid, path, e))?;
    let meta = file.metadata().map_err(|e| io_error(sid, path, e))?;
    Ok(OpenSpool {
        file: Arc::new(file),
        dev: meta.dev(),
        ino: meta.ino(),
        end: u64::MAX,
    })
}

/// `O_NOFOLLOW` answers a symlink swapped in after our `lstat` with ELOOP: still a symlink.
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
