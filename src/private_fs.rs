//! The file-system rules for wakebridge's own files: directories 0700 and files 0600 whatever the
//! umask, no symlink followed, no read blocked on a FIFO, no descriptor leaked to children, a file
//! replaced by write-sync-rename, a lock an `flock(2)` released when its `File` drops.

use std::fs::{DirBuilder, File, OpenOptions, Permissions, TryLockError};
use std::io::{self, ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub const FILE_MODE: u32 = 0o600;
pub const DIR_MODE: u32 = 0o700;

/// `mkdir -p dir`, then narrow it to [`DIR_MODE`] whatever mode it had. One `stat` when it is
/// already so: `wakebridge hook` passes here on every tool call, and a `chmod` writes the inode
/// even when nothing changes.
pub fn ensure_dir(dir: &Path) -> io::Result<()> {
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() && meta.permissions().mode() & 0o7777 == DIR_MODE => Ok(()),
        _ => {
            create_dir(dir)?;
            std::fs::set_permissions(dir, Permissions::from_mode(DIR_MODE))
        }
    }
}

/// `mkdir -p dir` with [`DIR_MODE`] for what it creates; an existing one keeps its mode.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)
}

/// Options every open of our files starts from: [`FILE_MODE`], no symlink, close-on-exec.
pub fn options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    options
}

/// Opens for reading without following a symlink or blocking on a FIFO.
pub fn open_read(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
}

fn open_lock(path: &Path) -> io::Result<File> {
    options().append(true).create(true).open(path)
}

/// Tries once to take the exclusive lock on `path` (created [`FILE_MODE`] if missing):
/// `Ok(None)` while another descriptor holds it.
pub fn try_lock(path: &Path) -> io::Result<Option<File>> {
    let file = open_lock(path)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

/// Waits, without a timeout, for the exclusive lock on `path` (for short holders).
pub fn lock(path: &Path) -> io::Result<File> {
    let file = open_lock(path)?;
    loop {
        match file.lock() {
            Ok(()) => return Ok(file),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Replaces `path` with `bytes`: a `<temp_prefix>*.tmp` file beside it (so the rename is
/// atomic), [`FILE_MODE`], synced, renamed over `path`. On failure `path` is untouched.
pub fn replace(path: &Path, bytes: &[u8], temp_prefix: &str) -> io::Result<()> {
    replace_if(path, bytes, temp_prefix, FILE_MODE, || Ok(true)).map(drop)
}

/// [`replace`] with `mode` (the user's files, such as Claude Code's settings, keep theirs),
/// renaming only if `still_ok` (asked once the temp file is synced) agrees; returns whether it
/// renamed.
pub fn replace_if(
    path: &Path,
    bytes: &[u8],
    temp_prefix: &str,
    mode: u32,
    still_ok: impl FnOnce() -> io::Result<bool>,
) -> io::Result<bool> {
    let dir = path
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut temp = tempfile::Builder::new()
        .prefix(temp_prefix)
        .suffix(".tmp")
        .permissions(Permissions::from_mode(mode))
        .tempfile_in(dir)?;
    temp.write_all(bytes)?;
    // set_permissions, not only the create mode: umask does not apply to it.
    temp.as_file()
        .set_permissions(Permissions::from_mode(mode))?;
    // Without this a crash right after the rename can leave an empty file on some filesystems.
    temp.as_file().sync_all()?;
    if !still_ok()? {
        return Ok(false);
    }
    // On failure the returned error owns the temp file, and dropping it deletes the file.
    temp.persist(path).map_err(|e| e.error)?;
    Ok(true)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    New,
    Replaced,
    Unchanged,
}

impl Written {
    pub fn of(path: &Path, bytes: &[u8]) -> Written {
        match std::fs::read(path) {
            Ok(old) if old == bytes => Written::Unchanged,
            Err(_) if !path.exists() => Written::New,
            _ => Written::Replaced,
        }
    }
}

/// [`replace`] with `mode`, creating the directory; a file already holding `bytes` is left alone.
pub fn write(path: &Path, bytes: &[u8], mode: u32) -> io::Result<Written> {
    let written = Written::of(path, bytes);
    if written != Written::Unchanged {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            create_dir(dir)?;
        }
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        replace_if(path, bytes, &format!(".{name}.wakebridge."), mode, || {
            Ok(true)
        })?;
    }
    Ok(written)
}

/// Most numbered backup names tried.
const MAX_BACKUPS: u32 = 10_000;

/// Keeps `bytes` in the first free `<path>.wakebridge-<n>.bak`, with `mode`, synced.
pub fn backup(path: &Path, bytes: &[u8], mode: u32) -> io::Result<PathBuf> {
    for n in 1..=MAX_BACKUPS {
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".wakebridge-{n}.bak"));
        let backup = PathBuf::from(name);
        let mut file = match options()
            .mode(mode)
            .write(true)
            .create_new(true)
            .open(&backup)
        {
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            opened => opened?,
        };
        let written = file
            .write_all(bytes)
            .and_then(|()| file.set_permissions(Permissions::from_mode(mode)))
            .and_then(|()| file.sync_all());
        if let Err(e) = written {
            let _ = std::fs::remove_file(&backup);
            return Err(io::Error::new(
                e.kind(),
                format!("{}: {e}", backup.display()),
            ));
        }
        return Ok(backup);
    }
    Err(io::Error::other(format!(
        "all {MAX_BACKUPS} backup names are taken"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).unwrap().mode() & 0o777
    }

    #[test]
    fn dirs_and_files_are_owner_only_whatever_they_were() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        ensure_dir(&dir).unwrap();
        assert_eq!(mode(&dir), DIR_MODE);
        std::fs::set_permissions(&dir, Permissions::from_mode(0o755)).unwrap();
        ensure_dir(&dir).unwrap();
        assert_eq!(mode(&dir), DIR_MODE);
        let file = dir.join("f");
        replace(&file, b"one", ".f.").unwrap();
        assert_eq!(mode(&file), FILE_MODE);
        assert_eq!(std::fs::read(&file).unwrap(), b"one");
        replace(&file, b"two", ".f.").unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"two");
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1, "no temp file is left behind");
    }

    #[test]
    fn write_creates_skips_and_backups_are_numbered() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("new/dir/f.json");
        assert_eq!(write(&file, b"a", 0o640).unwrap(), Written::New);
        assert_eq!(mode(&file), 0o640);
        assert_eq!(write(&file, b"a", 0o640).unwrap(), Written::Unchanged);
        assert_eq!(write(&file, b"b", 0o640).unwrap(), Written::Replaced);
        let first = backup(&file, b"b", 0o640).unwrap();
        assert_eq!(first, tmp.path().join("new/dir/f.json.wakebridge-1.bak"));
        let second = backup(&file, b"c", 0o600).unwrap();
        assert_eq!(second, tmp.path().join("new/dir/f.json.wakebridge-2.bak"));
        assert_eq!(std::fs::read(&first).unwrap(), b"b");
        assert_eq!((mode(&first), mode(&second)), (0o640, 0o600));
    }

    #[test]
    fn symlinks_are_never_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        for opened in [
            open_read(&link).map(drop),
            options().read(true).write(true).open(&link).map(drop),
            options().append(true).create(true).open(&link).map(drop),
            try_lock(&link).map(drop),
            lock(&link).map(drop),
        ] {
            assert_eq!(opened.unwrap_err().raw_os_error(), Some(libc::ELOOP));
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    }

    #[test]
    fn a_fifo_does_not_block_a_read() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(open_read(&fifo).is_ok());
    }

    #[test]
    fn a_held_lock_is_refused_until_released() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("x.lock");
        let held = try_lock(&path).unwrap().expect("free");
        assert_eq!(mode(&path), FILE_MODE);
        assert!(try_lock(&path).unwrap().is_none());
        drop(held);
        assert!(try_lock(&path).unwrap().is_some());
    }
}
