//! Busy markers: `<wake_dir>/<sid>.busy`, whose mtime says when the session was last seen
//! mid-turn. The age is wall clock; a future mtime reads as busy, the safe direction.

use crate::private_fs;
use crate::wakedir::ensure_wake_dir;
use std::fs::Permissions;
use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Marker suffix; deliberately outside the `<sid>.jsonl*` glob that spool pruning may sweep.
pub const BUSY_SUFFIX: &str = ".busy";
const MAX_SESSION_ID_BYTES: usize = 255 - BUSY_SUFFIX.len();

#[derive(Debug, thiserror::Error)]
pub enum MarkerError {
    #[error(
        "session id {0:?} cannot name a marker file: it must be a single path component \
         (no '/', NUL, '.' or '..', at most {MAX_SESSION_ID_BYTES} bytes)"
    )]
    UnsafeSessionId(String),
    #[error(
        "cannot prepare wake dir {path}: {source}; check --wake-dir / AGENT_EVENT_BUS_WAKE_DIR"
    )]
    WakeDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write busy marker {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot remove busy marker {path}: {source}")]
    Remove {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// `<wake_dir>/<sid>.busy`, refusing ids that would name a file outside the wake dir.
pub fn marker_path(wake_dir: &Path, session_id: &str) -> Result<PathBuf, MarkerError> {
    let safe = !session_id.is_empty()
        && session_id.len() <= MAX_SESSION_ID_BYTES
        && session_id != "."
        && session_id != ".."
        && !session_id.contains(['/', '\0']);
    if !safe {
        return Err(MarkerError::UnsafeSessionId(session_id.to_owned()));
    }
    Ok(wake_dir.join(format!("{session_id}{BUSY_SUFFIX}")))
}

/// Marks the session mid-turn (the mtime now). Idempotent.
pub fn set_busy(wake_dir: &Path, session_id: &str) -> Result<(), MarkerError> {
    let path = marker_path(wake_dir, session_id)?;
    ensure_wake_dir(wake_dir).map_err(|source| MarkerError::WakeDir {
        path: wake_dir.to_owned(),
        source,
    })?;
    let write_err = |source| MarkerError::Write {
        path: path.clone(),
        source,
    };
    let file = private_fs::options()
        .write(true)
        .create(true)
        .open(&path)
        .map_err(write_err)?;
    // An existing marker is narrowed too, with an `fchmod` only when its mode differs (this runs
    // on every tool call, and the `fchmod` writes the inode as `set_modified` does).
    if file.metadata().map_err(write_err)?.permissions().mode() & 0o7777 != private_fs::FILE_MODE {
        file.set_permissions(Permissions::from_mode(private_fs::FILE_MODE))
            .map_err(write_err)?;
    }
    // Opening an existing file does not bump its mtime, and the mtime is the freshness signal.
    file.set_modified(SystemTime::now()).map_err(write_err)?;
    Ok(())
}

/// Marks the session idle; a missing marker is success.
pub fn clear_busy(wake_dir: &Path, session_id: &str) -> Result<(), MarkerError> {
    let path = marker_path(wake_dir, session_id)?;
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == ErrorKind::NotFound => Ok(()),
        Err(source) => Err(MarkerError::Remove { path, source }),
    }
}

/// As [`clear_busy`], and an id which cannot name a marker file has none to clear.
pub fn clear_busy_if_any(wake_dir: &Path, session_id: &str) -> Result<(), MarkerError> {
    match clear_busy(wake_dir, session_id) {
        Err(MarkerError::UnsafeSessionId(_)) => Ok(()),
        other => other,
    }
}

/// Whether a marker younger than `ttl_secs` exists. Missing or unreadable markers are idle, so
/// a delivery is never failed and a session never wedged; `ttl_secs` may be infinite or 0.
pub fn is_busy(wake_dir: &Path, session_id: &str, ttl_secs: f64) -> bool {
    let modified = marker_path(wake_dir, session_id)
        .ok()
        .and_then(|path| std::fs::metadata(path).ok()?.modified().ok());
    modified.is_some_and(|then| busy_at_age(age_secs(SystemTime::now(), then), ttl_secs))
}

/// Busy iff `age < ttl` (so a NaN TTL is never busy).
pub fn busy_at_age(age_secs: f64, ttl_secs: f64) -> bool {
    age_secs < ttl_secs
}

/// `now - then` in seconds, negative when `then` is in the future.
pub fn age_secs(now: SystemTime, then: SystemTime) -> f64 {
    match now.duration_since(then) {
        Ok(age) => age.as_secs_f64(),
        Err(ahead) => -ahead.duration().as_secs_f64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ageing_rule_matches_the_reference() {
        assert!(busy_at_age(10.0, 60.0));
        assert!(!busy_at_age(60.0, 60.0));
        assert!(!busy_at_age(0.0, 0.0), "ttl 0 ignores a fresh marker");
        assert!(
            busy_at_age(-3600.0, 0.0),
            "a future marker gates even at ttl 0"
        );
        assert!(busy_at_age(1e12, f64::INFINITY));
        assert!(!busy_at_age(1.0, f64::NAN));
    }

    #[test]
    fn age_is_negative_for_future_times() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(10_000);
        assert_eq!(age_secs(now, now - Duration::from_secs(30)), 30.0);
        assert_eq!(age_secs(now, now + Duration::from_secs(30)), -30.0);
    }

    #[test]
    fn refuses_ids_that_leave_the_wake_dir() {
        let dir = Path::new("/w");
        for bad in ["", ".", "..", "../x", "a/b", "a\0b", &"a".repeat(251)] {
            assert!(marker_path(dir, bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            marker_path(dir, "sid-1").ok(),
            Some(PathBuf::from("/w/sid-1.busy"))
        );
        assert!(marker_path(dir, "foo.bar").is_ok(), "dots inside are fine");
    }

    #[test]
    fn an_existing_marker_is_narrowed_and_its_mtime_bumped() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("sid-1.busy");
        std::fs::write(&path, b"").unwrap();
        std::fs::set_permissions(&path, Permissions::from_mode(0o644)).unwrap();
        let old = SystemTime::now() - Duration::from_secs(600);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
        set_busy(tmp.path(), "sid-1").unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, private_fs::FILE_MODE);
        assert!(meta.modified().unwrap() > old + Duration::from_secs(300));
        assert!(is_busy(tmp.path(), "sid-1", 60.0));
    }
}
