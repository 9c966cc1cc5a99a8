//! Where the wake dir is and how it is prepared: the default under `$HOME`, the
//! `AGENT_EVENT_BUS_WAKE_DIR` override, a `--wake-dir` flag above both, and the `mkdir -p` +
//! `chmod 0700` every writer performs (the dir holds full event payloads, so its mode is asserted
//! on every write rather than trusted from creation). It does not lay out the files inside.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Environment variable naming the wake dir (an empty value means the default).
pub const WAKE_DIR_ENV: &str = "AGENT_EVENT_BUS_WAKE_DIR";
/// The default wake dir relative to `$HOME`, shared with the Python bridge and CLI.
pub const DEFAULT_WAKE_DIR_UNDER_HOME: &str = ".claude/contrib/agent-event-bus/wake";
/// Wake dir mode: owner only.
pub const WAKE_DIR_MODE: u32 = 0o700;

/// Why no usable wake dir path could be determined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WakeDirError {
    #[error(
        "HOME is not set to an absolute path, so the default wake dir is unknown; \
         pass --wake-dir or set {WAKE_DIR_ENV}"
    )]
    NoHome,
    #[error(
        "wake dir {0:?} is relative; hooks run from many working directories, so pass an \
         absolute --wake-dir / {WAKE_DIR_ENV}"
    )]
    Relative(PathBuf),
}

/// `$HOME/.claude/contrib/agent-event-bus/wake`.
pub fn default_wake_dir() -> Result<PathBuf, WakeDirError> {
    default_wake_dir_from(&|name: &str| std::env::var(name).ok())
}

/// The wake dir from the process environment: `AGENT_EVENT_BUS_WAKE_DIR`, else the default.
pub fn wake_dir_from_env() -> Result<PathBuf, WakeDirError> {
    resolve_wake_dir(None, &|name: &str| std::env::var(name).ok())
}

/// Flag > `AGENT_EVENT_BUS_WAKE_DIR` (empty falls through) > default; relative paths refused.
pub fn resolve_wake_dir(
    flag: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<PathBuf, WakeDirError> {
    let chosen = match flag.filter(|path| !path.as_os_str().is_empty()) {
        Some(path) => path.to_owned(),
        None => match env(WAKE_DIR_ENV).filter(|value| !value.is_empty()) {
            Some(value) => PathBuf::from(value),
            None => default_wake_dir_from(env)?,
        },
    };
    if chosen.is_relative() {
        return Err(WakeDirError::Relative(chosen));
    }
    Ok(chosen)
}

fn default_wake_dir_from(env: &dyn Fn(&str) -> Option<String>) -> Result<PathBuf, WakeDirError> {
    let home = env("HOME")
        .map(PathBuf::from)
        .filter(|home| home.is_absolute())
        .ok_or(WakeDirError::NoHome)?;
    Ok(home.join(DEFAULT_WAKE_DIR_UNDER_HOME))
}

/// `mkdir -p` the wake dir and narrow it to 0700, whatever mode it had.
pub fn ensure_wake_dir(wake_dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(wake_dir)?;
    std::fs::set_permissions(wake_dir, std::fs::Permissions::from_mode(WAKE_DIR_MODE))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::env_of;

    #[test]
    fn flag_beats_env_beats_default() {
        let env = env_of(&[("HOME", "/home/u"), (WAKE_DIR_ENV, "/env/wake")]);
        assert_eq!(
            resolve_wake_dir(Some(Path::new("/flag")), &env),
            Ok(PathBuf::from("/flag"))
        );
        assert_eq!(resolve_wake_dir(None, &env), Ok(PathBuf::from("/env/wake")));
    }

    #[test]
    fn empty_env_value_means_the_default() {
        let env = env_of(&[("HOME", "/home/u"), (WAKE_DIR_ENV, "")]);
        assert_eq!(
            resolve_wake_dir(None, &env),
            Ok(PathBuf::from(
                "/home/u/.claude/contrib/agent-event-bus/wake"
            ))
        );
    }

    #[test]
    fn relative_dirs_and_missing_home_are_refused() {
        let env = env_of(&[(WAKE_DIR_ENV, "wake")]);
        assert!(matches!(
            resolve_wake_dir(None, &env),
            Err(WakeDirError::Relative(_))
        ));
        assert_eq!(
            resolve_wake_dir(None, &env_of(&[])),
            Err(WakeDirError::NoHome)
        );
        let message = WakeDirError::Relative("wake".into()).to_string();
        assert!(message.contains("--wake-dir"));
    }
}
