//! Putting back what a crash took: each pending spool round is checked under the session lock in
//! the file it names (by inode, whatever `<sid>.jsonl*` name a drainer gave it) and completed
//! where its bytes are missing. Bytes that are not ours are never overwritten.

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use std::collections::HashMap;

use super::files::{self, io_error};
use super::{SpoolError, writer::LOCK_RETRY};
use crate::deadline::Deadline;
use crate::store::PendingBytes as Entry;
use crate::wire::session_id::SessionId;

/// How long recovery waits for a drainer to release one session's lock.
pub const LOCK_PATIENCE: Duration = Duration::from_secs(10);

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Restored {
    pub records: usize,
    pub bytes: u64,
    /// Records whose file a drainer took and deleted.
    pub gone: usize,
    /// Records whose inode number was reused: left alone.
    pub foreign: usize,
}

/// Makes sure every entry's bytes are in its files, in ledger order, and every file found is on
/// disk (after a kill the lines may be only in the page cache; the caller then drops the rows).
pub fn replay(
    wake_dir: &Path,
    entries: &[Entry],
    patience: Duration,
) -> Result<Restored, SpoolError> {
    let mut restored = Restored::default();
    let mut found: HashMap<u64, (PathBuf, File)> = HashMap::new();
    for entry in entries {
        if !SessionId::is_valid(&entry.session_id) {
            tracing::warn!(session_id = ?entry.session_id, "skipping a pending spool round with an unsafe session id");
            continue;
        }
        let deadline = Deadline::after(patience);
        let _lock = loop {
            if let Some(lock) = files::try_lock(wake_dir, &entry.session_id)? {
                break lock;
            }
            if deadline.expired() {
                return Err(SpoolError::LockTimeout(entry.session_id.clone()));
            }
            std::thread::sleep(LOCK_RETRY);
        };
        restored.records += 1;
        let Some((path, file)) = find(wake_dir, entry)? else {
            // A drainer took the file and finished with it: it read our lines from the page
            // cache before deleting it.
            restored.gone += 1;
            continue;
        };
        match restore(wake_dir, entry, &path, &file)? {
            Some(bytes) => restored.bytes += bytes,
            None => restored.foreign += 1,
        }
        found.entry(entry.inode).or_insert((path, file));
    }
    for (path, file) in found.values() {
        file.sync_data().map_err(|e| io_error("-", path, e))?;
    }
    Ok(restored)
}

/// Completes one entry in `file`; returns the bytes written, `None` when the place is not ours.
fn restore(
    wake_dir: &Path,
    entry: &Entry,
    path: &Path,
    file: &File,
) -> Result<Option<u64>, SpoolError> {
    let err = |e| io_error(&entry.session_id, path, e);
    let len = file.metadata().map_err(err)?.len();
    let have = len
        .saturating_sub(entry.offset)
        .min(entry.bytes.len() as u64) as usize;
    let mut present = vec![0u8; have];
    file.read_exact_at(&mut present, entry.offset)
        .map_err(err)?;
    let ours_or_zero = present
        .iter()
        .zip(&entry.bytes)
        .all(|(&on_disk, &mine)| on_disk == mine || on_disk == 0);
    if !ours_or_zero {
        // Other bytes where ours were: this inode number now belongs to another file.
        return Ok(None);
    }
    if len >= entry.offset {
        // Our place is there (whole, cut short, or zeros): write our bytes over it, even when
        // they read back: after a failed writeback Linux keeps the pages readable but clean, and
        // only a new write makes the next fsync put them on the disk.
        file.write_all_at(&entry.bytes, entry.offset).map_err(err)?;
        let restored = present
            .iter()
            .zip(&entry.bytes)
            .filter(|(on_disk, mine)| on_disk != mine)
            .count()
            + (entry.bytes.len() - have);
        return Ok(Some(restored as u64));
    }
    // The file ends before our offset (lines before ours were lost too): append to the live
    // spool rather than leave a hole.
    let sid = &entry.session_id;
    let prepared = files::prepare(wake_dir, sid)?;
    prepared.write(sid, &entry.bytes)?;
    prepared.sync(sid)?;
    if prepared.created {
        files::sync_dir(wake_dir).map_err(|e| io_error(sid, wake_dir, e))?;
    }
    Ok(Some(entry.bytes.len() as u64))
}

/// The entry's file: `<sid>.jsonl` if still that inode, else a `<sid>.jsonl.*` a drainer made.
fn find(wake_dir: &Path, entry: &Entry) -> Result<Option<(PathBuf, File)>, SpoolError> {
    let live = files::spool_path(wake_dir, &entry.session_id);
    if let Some(found) = open_if_same(&live, entry)? {
        return Ok(Some(found));
    }
    let prefix = format!("{}.jsonl", entry.session_id);
    let listing =
        std::fs::read_dir(wake_dir).map_err(|e| io_error(&entry.session_id, wake_dir, e))?;
    for path in listing.filter_map(Result::ok).map(|d| d.path()) {
        let renamed = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.len() > prefix.len() && n.starts_with(&prefix));
        if renamed && let Some(found) = open_if_same(&path, entry)? {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

fn open_if_same(path: &Path, entry: &Entry) -> Result<Option<(PathBuf, File)>, SpoolError> {
    match std::fs::symlink_metadata(path) {
        // By inode only: a device number can change across boots; all are in one wake dir.
        Ok(meta) if meta.is_file() && meta.ino() == entry.inode => {
            let file = crate::private_fs::options()
                .read(true)
                .write(true)
                .open(path)
                .map_err(|e| io_error(&entry.session_id, path, e))?;
            Ok(Some((path.to_path_buf(), file)))
        }
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry_for(path: &Path, sid: &str, offset: u64, text: &str) -> Entry {
        let meta = std::fs::metadata(path).expect("stat");
        Entry {
            session_id: sid.into(),
            inode: meta.ino(),
            offset,
            bytes: text.as_bytes().to_vec(),
        }
    }

    fn replay_now(dir: &Path, entries: &[Entry]) -> Restored {
        replay(dir, entries, Duration::from_millis(300)).expect("replay")
    }

    #[test]
    fn lines_already_in_place_are_left_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, "one\ntwo\nthree\n").expect("seed");
        let entries = [entry_for(&path, "s", 4, "two\n")];
        assert_eq!(replay_now(dir.path(), &entries).bytes, 0);
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            "one\ntwo\nthree\n"
        );
    }

    #[test]
    fn zeros_where_our_lines_were_are_written_over_exactly() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.jsonl");
        // What a crash mid-writeback can leave: the size made it to disk, some data did not.
        std::fs::write(&path, "one\ntw\0\0").expect("seed");
        let entries = [entry_for(&path, "s", 4, "two\n")];
        assert_eq!(replay_now(dir.path(), &entries).bytes, 2);
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "one\ntwo\n");
    }

    #[test]
    fn a_file_cut_before_our_offset_gets_the_lines_appended() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, "one\ntwo\n").expect("seed");
        let entries = [entry_for(&path, "s", 20, "three\n")];
        std::fs::write(&path, "one\ntw").expect("cut");
        assert_eq!(replay_now(dir.path(), &entries).bytes, 6);
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            "one\ntw\nthree\n"
        );
    }

    #[test]
    fn a_reused_inode_holding_other_lines_is_left_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, "{\"someone\": \"else\"}\n").expect("seed");
        let entries = [entry_for(&path, "s", 0, "{\"ours\": 1}\n")];
        let restored = replay_now(dir.path(), &entries);
        assert_eq!((restored.bytes, restored.foreign), (0, 1));
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            "{\"someone\": \"else\"}\n"
        );
    }

    #[test]
    fn a_file_a_drainer_took_and_deleted_gets_nothing_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, "one\n").expect("seed");
        let entries = [entry_for(&path, "s", 0, "one\n")];
        let drained = dir.path().join("s.jsonl.work");
        std::fs::rename(&path, &drained).expect("take");
        // Keep the inode alive under another directory so its number is not reused.
        let kept = dir.path().join("elsewhere");
        std::fs::create_dir(&kept).expect("dir");
        std::fs::rename(&drained, kept.join("x")).expect("move out");
        assert_eq!(replay_now(dir.path(), &entries).bytes, 0);
        assert!(
            !path.exists(),
            "no new spool with a line the drainer already had"
        );
    }

    #[test]
    fn a_held_lock_past_the_patience_fails_by_session() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, "").expect("seed");
        let entries = [entry_for(&path, "s", 0, "one\n")];
        let held = File::create(dir.path().join("s.lock")).expect("lock");
        held.lock().expect("flock");
        let err = replay(dir.path(), &entries, Duration::from_millis(200)).expect_err("timeout");
        assert_eq!(err, SpoolError::LockTimeout("s".into()));
        held.unlock().expect("unlock");
        assert_eq!(replay_now(dir.path(), &entries).bytes, 4);
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "one\n");
    }
}
