//! Per-session context state files for other tools (prompts, tmux status bars):
//! `PCT=<integer>\nTIMESTAMP=<unix seconds>\n` at `<state_dir>/context/<session_id>`, and the
//! atomic write every small file of the context monitor uses, so no reader sees half a file.

use std::path::{Path, PathBuf};

use crate::private_fs;
use crate::wire::session_id::SessionId;

/// The directory of the per-session state files under `state_dir`.
pub fn states_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("context")
}

#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    #[error("session id {0:?} is not usable as a file name; expected letters, digits, '-' or '_'")]
    BadSessionId(String),
    #[error("cannot create directory {path}: {source}; check the state dir exists and is writable")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}; check free space and permissions of its directory")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} has no parent directory; give a file path inside a directory")]
    NoParent { path: PathBuf },
}

/// Writes `bytes` to `path` atomically (temp file, 0600, fsync, rename), creating its directory.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), StateFileError> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .ok_or_else(|| StateFileError::NoParent {
            path: path.to_owned(),
        })?;
    private_fs::create_dir(dir).map_err(|source| StateFileError::CreateDir {
        path: dir.to_owned(),
        source,
    })?;
    private_fs::replace(path, bytes, ".wakebridge.").map_err(|source| StateFileError::Write {
        path: path.to_owned(),
        source,
    })
}

pub fn state_path(state_dir: &Path, session_id: &str) -> Result<PathBuf, StateFileError> {
    if !SessionId::is_valid(session_id) {
        return Err(StateFileError::BadSessionId(session_id.to_owned()));
    }
    Ok(states_dir(state_dir).join(session_id))
}

/// Writes the session's state file and, when `latest` is given, the same content there.
pub fn write_state(
    state_dir: &Path,
    session_id: &str,
    percent: f64,
    unix_seconds: u64,
    latest: Option<&Path>,
) -> Result<(), StateFileError> {
    let path = state_path(state_dir, session_id)?;
    let pct = super::window::whole_percent(percent).unwrap_or(0);
    let content = format!("PCT={pct}\nTIMESTAMP={unix_seconds}\n");
    for path in [Some(path.as_path()), latest].into_iter().flatten() {
        atomic_write(path, content.as_bytes())?;
    }
    Ok(())
}

/// What a state file last said: the whole percent and the minute its figure was read. It is
/// rewritten only when this changes, so a busy transcript costs at most a write a minute and an
/// idle one none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateStamp {
    pub pct: u32,
    pub minute: u64,
}

impl StateStamp {
    pub fn of(percent: f64, unix_seconds: u64) -> Self {
        Self {
            pct: super::window::whole_percent(percent).unwrap_or(0),
            minute: unix_seconds / 60,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn state_file_rewritten_only_on_new_percent_or_minute() {
        let first = StateStamp::of(42.4, 120);
        assert_eq!(first, StateStamp::of(41.6, 179));
        assert_ne!(first, StateStamp::of(42.0, 180));
        assert_ne!(first, StateStamp::of(43.0, 121));
        assert_eq!(StateStamp::of(f64::NAN, 0).pct, 0);
    }

    #[test]
    fn writes_private_file_atomically_with_latest_copy() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let latest = dir.path().join("latest").join("ctx");
        write_state(dir.path(), "sid-1", 42.6, 1_700_000_000, Some(&latest))?;
        let path = dir.path().join("context").join("sid-1");
        assert_eq!(
            std::fs::read_to_string(&path)?,
            "PCT=43\nTIMESTAMP=1700000000\n"
        );
        assert_eq!(
            std::fs::read_to_string(&latest)?,
            "PCT=43\nTIMESTAMP=1700000000\n"
        );
        assert_eq!(std::fs::metadata(&path)?.mode() & 0o777, 0o600);
        let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("context"))?
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
        Ok(())
    }

    #[test]
    fn refuses_path_like_session_ids() {
        let dir = std::env::temp_dir();
        for sid in ["", "..", "a/b", "../x", ".hidden"] {
            assert!(matches!(
                write_state(&dir, sid, 1.0, 1, None),
                Err(StateFileError::BadSessionId(_))
            ));
        }
    }
}
