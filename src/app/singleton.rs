//! The two singleton `flock`s, at the Python bridge's paths so the two bridges exclude each other:
//! one per hook URL (under `$XDG_RUNTIME_DIR` or the temp dir, per uid) and one per wake dir.

use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::config::Env;

/// Name of the wake-dir lock; the `.` keeps it from ever colliding with a `<sid>.lock`.
pub const WAKE_DIR_LOCK: &str = "bridge.singleton.lock";
const HOOK_HASH_CHARS: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum SingletonError {
    #[error(
        "Another bridge (wakebridge or agent-event-bus-bridge) is already registered for hook URL {url} (lock {lock}); stop it, or give this one another --port and --hook-url"
    )]
    HookTaken { url: String, lock: PathBuf },
    #[error(
        "Another bridge (wakebridge or agent-event-bus-bridge) is already running on wake dir {dir}; stop it, or give this one another --wake-dir"
    )]
    WakeDirTaken { dir: PathBuf },
    #[error("Cannot create bridge lock dir {dir}: {source}")]
    LockDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("bridge lock dir {dir} is not a directory (a symlink or a file?); remove it")]
    LockDirNotDir { dir: PathBuf },
    #[error(
        "bridge lock dir {dir} is group/world-accessible or not ours; remove it or chmod 700 it"
    )]
    LockDirUnsafe { dir: PathBuf },
    #[error("Cannot open bridge lock {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
}

#[derive(Debug)]
pub struct Singletons {
    _hook: File,
    _wake_dir: File,
}

/// `($XDG_RUNTIME_DIR or the temp dir)/agent-event-bus-bridge-<uid>`.
pub fn lock_dir(env: &Env) -> PathBuf {
    let base = env
        .get("XDG_RUNTIME_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| python_tempdir(env));
    // SAFETY: getuid cannot fail and touches no memory.
    let uid = unsafe { libc::getuid() };
    base.join(format!("agent-event-bus-bridge-{uid}"))
}

/// Python's `tempfile.gettempdir()`: the first writable of TMPDIR, TEMP, TMP, /tmp, ....
fn python_tempdir(env: &Env) -> PathBuf {
    let candidates = ["TMPDIR", "TEMP", "TMP"]
        .iter()
        .filter_map(|name| env.get(name).filter(|v| !v.is_empty()))
        .chain(["/tmp", "/var/tmp", "/usr/tmp"].map(String::from));
    for dir in candidates {
        let path = PathBuf::from(dir.trim_end_matches('/'));
        if tempfile::tempfile_in(&path).is_ok() {
            return std::path::absolute(&path).unwrap_or(path);
        }
    }
    PathBuf::from("/tmp")
}

pub fn hook_lock_path(env: &Env, hook_url: &str) -> PathBuf {
    let digest = hex::encode(Sha256::digest(hook_url.as_bytes()));
    lock_dir(env).join(format!("hook.{}.lock", &digest[..HOOK_HASH_CHARS]))
}

/// Takes the hook-URL lock, then the wake-dir lock (the first is released if the second fails).
pub fn acquire(env: &Env, hook_url: &str, wake_dir: &Path) -> Result<Singletons, SingletonError> {
    let dir = lock_dir(env);
    prepare_lock_dir(&dir)?;
    let hook_lock_path = hook_lock_path(env, hook_url);
    let hook = lock_file(&hook_lock_path)?.ok_or_else(|| SingletonError::HookTaken {
        url: hook_url.to_string(),
        lock: hook_lock_path,
    })?;
    let wake_lock = wake_dir.join(WAKE_DIR_LOCK);
    let wake = lock_file(&wake_lock)?.ok_or_else(|| SingletonError::WakeDirTaken {
        dir: wake_dir.to_path_buf(),
    })?;
    Ok(Singletons {
        _hook: hook,
        _wake_dir: wake,
    })
}

/// Created 0700 if missing; an existing one must be ours and private (a planted dir would let
/// another user hold our lock).
fn prepare_lock_dir(dir: &Path) -> Result<(), SingletonError> {
    let lock_dir_error = |source| SingletonError::LockDir {
        dir: dir.to_path_buf(),
        source,
    };
    match std::fs::DirBuilder::new()
        .mode(crate::private_fs::DIR_MODE)
        .create(dir)
    {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(lock_dir_error(e)),
        _ => {}
    }
    let meta = std::fs::symlink_metadata(dir).map_err(lock_dir_error)?;
    if !meta.file_type().is_dir() {
        return Err(SingletonError::LockDirNotDir {
            dir: dir.to_path_buf(),
        });
    }
    // SAFETY: getuid cannot fail and touches no memory.
    let uid = unsafe { libc::getuid() };
    if meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(SingletonError::LockDirUnsafe {
            dir: dir.to_path_buf(),
        });
    }
    Ok(())
}

fn lock_file(path: &Path) -> Result<Option<File>, SingletonError> {
    crate::private_fs::try_lock(path).map_err(|source| SingletonError::Open {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_with_runtime(dir: &Path) -> Env {
        Env::from_pairs([("XDG_RUNTIME_DIR", dir.display().to_string())])
    }

    /// `acquire` once the locks just released are free: a child another test thread forks in
    /// that moment holds a copy of the descriptor (and so the flock) until it execs.
    fn acquire_when_free(env: &Env, url: &str, wake: &Path) -> Singletons {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        loop {
            match acquire(env, url, wake) {
                Ok(held) => return held,
                Err(e) if std::time::Instant::now() > deadline => panic!("still held: {e}"),
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        }
    }

    #[test]
    fn second_holder_is_refused_and_release_frees_it() {
        let runtime = tempfile::tempdir().expect("tempdir");
        let wake = tempfile::tempdir().expect("tempdir");
        let env = env_with_runtime(runtime.path());
        let url = "http://127.0.0.1:8082/hook";
        let first = acquire(&env, url, wake.path()).expect("first");
        assert!(matches!(
            acquire(&env, url, wake.path()),
            Err(SingletonError::HookTaken { .. })
        ));
        let other_wake = tempfile::tempdir().expect("tempdir");
        let err = acquire(&env, url, other_wake.path()).expect_err("same hook URL");
        assert!(err.to_string().contains("hook URL"));
        let err =
            acquire(&env, "http://127.0.0.1:9099/hook", wake.path()).expect_err("same wake dir");
        assert!(err.to_string().contains("wake dir"));
        // The hook lock taken before the wake-dir refusal was released again.
        let distinct = acquire_when_free(&env, "http://127.0.0.1:9099/hook", other_wake.path());
        drop(first);
        drop(distinct);
        acquire_when_free(&env, url, wake.path());
    }

    #[test]
    fn lock_paths_match_the_python_bridge() {
        let env = Env::from_pairs([("XDG_RUNTIME_DIR", "/run/user/1000")]);
        let path = hook_lock_path(&env, "http://127.0.0.1:8082/hook");
        let name = path.file_name().and_then(|n| n.to_str()).expect("name");
        // SAFETY: getuid takes nothing and cannot fail.
        let uid = unsafe { libc::getuid() };
        assert!(path.starts_with(format!("/run/user/1000/agent-event-bus-bridge-{uid}")));
        // sha256("http://127.0.0.1:8082/hook")[:16], computed independently with sha256sum.
        assert_eq!(name, "hook.dedde0dfaaefc378.lock");
    }

    #[test]
    fn unsafe_lock_dirs_are_refused() {
        let runtime = tempfile::tempdir().expect("tempdir");
        let env = env_with_runtime(runtime.path());
        let dir = lock_dir(&env);
        std::fs::create_dir(&dir).expect("mkdir");
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .expect("chmod");
        let wake = tempfile::tempdir().expect("tempdir");
        let err = acquire(&env, "http://127.0.0.1:8082/hook", wake.path()).expect_err("0777");
        assert!(matches!(err, SingletonError::LockDirUnsafe { .. }));
        std::fs::remove_dir(&dir).expect("rmdir");
        std::os::unix::fs::symlink(runtime.path(), &dir).expect("symlink");
        let err = acquire(&env, "http://127.0.0.1:8082/hook", wake.path()).expect_err("symlink");
        assert!(matches!(err, SingletonError::LockDirNotDir { .. }));
    }
}
