//! The `panes.json` writer: a read-modify-write under `flock(2)` on `panes.lock`, replaced by
//! rename; it evicts other ids on the same pane and removes the busy markers of ids it unmaps.
//! Only damaged *content* reads as `{}`; any other I/O error aborts before the file is touched,
//! since reading a transient EMFILE as "empty" would wipe every other session's entry.

use crate::private_fs;
use crate::wakedir::ensure_wake_dir;
use crate::wakedir::markers::clear_busy_if_any;
use crate::wakedir::panes::{InvalidTarget, PANES_FILE, PANES_LOCK_FILE, entry_json, parse_target};
use crate::wakedir::target::PaneTarget;
use crate::wire::pyjson::to_pretty_ascii;
use serde_json::{Map, Value, json};
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};

/// Largest `panes.json` read back: bounded so a hostile file cannot exhaust memory while the
/// lock is held. A larger file aborts the write instead of being silently dropped.
const MAX_PANES_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// Hidden, and (with its `.tmp` suffix) outside every glob the bridge reads.
const TEMP_PREFIX: &str = ".panes.";

/// On every variant `panes.json` is left as it was.
#[derive(Debug, thiserror::Error)]
pub enum PanesWriteError {
    #[error("invalid target: {0}")]
    InvalidTarget(#[from] InvalidTarget),
    #[error(
        "cannot prepare wake dir {path}: {source}; check --wake-dir / AGENT_EVENT_BUS_WAKE_DIR"
    )]
    WakeDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "cannot lock {path}: {source}; it must be a regular file (not a symlink) in the wake dir"
    )]
    Lock {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "cannot read {path}: {source}; aborted without writing so other sessions' entries \
         survive (retry, or remove the file if it is not a regular file)"
    )]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} is larger than {MAX_PANES_FILE_BYTES} bytes; aborted without writing (inspect and remove it)"
    )]
    TooLarge { path: PathBuf },
    #[error(
        "cannot serialise panes.json: {0}; aborted without writing (remove the entry holding \
         that number)"
    )]
    NotSerializable(#[from] crate::wire::pyjson::NotSerializable),
    #[error("cannot write {path}: {source}; the previous file is unchanged")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetOutcome {
    pub session_id: String,
    pub entry: PaneTarget,
    pub evicted: Vec<String>,
}

impl SetOutcome {
    /// The reference CLI's JSON result.
    pub fn to_json(&self) -> Value {
        json!({
            "session_id": self.session_id,
            "entry": entry_json(&self.entry),
            "evicted": self.evicted,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClearOutcome {
    pub session_id: String,
    pub removed: Vec<String>,
    pub existed: bool,
}

impl ClearOutcome {
    pub fn to_json(&self) -> Value {
        json!({
            "session_id": self.session_id,
            "removed": self.removed,
            "existed": self.existed,
        })
    }
}

/// Maps `session_id` to `target`, evicting every other id on the same pane. Unparseable
/// neighbours are kept: their warning is the operator's cue.
pub fn set_entry(
    wake_dir: &Path,
    session_id: &str,
    target: &PaneTarget,
) -> Result<SetOutcome, PanesWriteError> {
    let entry = entry_json(target);
    // The writer never writes what the reader would reject.
    let entry_target = parse_target(&entry)?;
    let evicted = rewrite(
        wake_dir,
        |sid, value| sid != session_id && parse_target(value).as_ref() == Ok(&entry_target),
        Some((session_id, entry)),
    )?;
    Ok(SetOutcome {
        session_id: session_id.to_owned(),
        entry: entry_target,
        evicted,
    })
}

/// Unmaps `session_id`, plus every entry on `also_pane`. A missing `panes.json` is
/// `existed: false`, nothing created and no lock taken.
pub fn clear_entry(
    wake_dir: &Path,
    session_id: &str,
    also_pane: Option<&PaneTarget>,
) -> Result<ClearOutcome, PanesWriteError> {
    let existed = !matches!(
        std::fs::symlink_metadata(wake_dir.join(PANES_FILE)),
        Err(err) if err.kind() == ErrorKind::NotFound
    );
    let unmap = |sid: &str, value: &Value| {
        sid == session_id || also_pane.is_some_and(|pane| parse_target(value).as_ref() == Ok(pane))
    };
    let removed = match existed {
        true => rewrite(wake_dir, unmap, None)?,
        false => Vec::new(),
    };
    Ok(ClearOutcome {
        session_id: session_id.to_owned(),
        removed,
        existed,
    })
}

/// Under the lock, removes every entry `unmap` picks, adds `insert`, and rewrites the file if
/// that changed anything. Returns the unmapped ids, whose markers go after the unlock.
fn rewrite(
    wake_dir: &Path,
    unmap: impl Fn(&str, &Value) -> bool,
    insert: Option<(&str, Value)>,
) -> Result<Vec<String>, PanesWriteError> {
    ensure_wake_dir(wake_dir).map_err(|source| PanesWriteError::WakeDir {
        path: wake_dir.to_owned(),
        source,
    })?;
    let removed = {
        // Blocking and without a timeout, like the reference: writers are short and always finish.
        let path = wake_dir.join(PANES_LOCK_FILE);
        let _lock =
            private_fs::lock(&path).map_err(|source| PanesWriteError::Lock { path, source })?;
        let mut panes = read_for_update(wake_dir)?;
        let removed: Vec<String> = panes
            .iter()
            .filter(|(sid, value)| unmap(sid, value))
            .map(|(sid, _)| sid.clone())
            .collect();
        for sid in &removed {
            panes.remove(sid);
        }
        if insert.is_some() || !removed.is_empty() {
            if let Some((sid, entry)) = insert {
                panes.insert(sid.to_owned(), entry);
            }
            write_atomic(wake_dir, &panes)?;
        }
        removed
    };
    // After unlock: marker removal never extends the time other writers wait.
    for session_id in &removed {
        if let Err(err) = clear_busy_if_any(wake_dir, session_id) {
            tracing::warn!(session_id, error = %err, "cannot remove busy marker of unmapped session");
        }
    }
    Ok(removed)
}

fn read_for_update(wake_dir: &Path) -> Result<Map<String, Value>, PanesWriteError> {
    let path = wake_dir.join(PANES_FILE);
    let read_err = |source| PanesWriteError::Read {
        path: path.clone(),
        source,
    };
    // Non-blocking so a planted FIFO cannot hang a writer that holds the lock; no-follow so a
    // planted symlink is reported rather than read through.
    let file = match private_fs::open_read(&path) {
        Ok(file) => file,
        Err(err) if err.kind() == ErrorKind::NotFound => return Ok(Map::new()),
        Err(err) => return Err(read_err(err)),
    };
    let mut bytes = Vec::new();
    file.take(MAX_PANES_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_PANES_FILE_BYTES {
        return Err(PanesWriteError::TooLarge { path });
    }
    serde_json::from_slice(&bytes).or_else(|_| {
        tracing::warn!(path = %path.display(), "panes.json was damaged or not an object; replacing it");
        Ok(Map::new())
    })
}

fn write_atomic(wake_dir: &Path, panes: &Map<String, Value>) -> Result<(), PanesWriteError> {
    let path = wake_dir.join(PANES_FILE);
    let text = to_pretty_ascii(&Value::Object(panes.clone()))? + "\n";
    private_fs::replace(&path, text.as_bytes(), TEMP_PREFIX)
        .map_err(|source| PanesWriteError::Write { path, source })
}
