//! Where the ledger lives by default (XDG state directory). It owns only the path rule; it does
//! not create anything.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Directory under the state home that holds wakebridge's files.
pub const STATE_DIR_NAME: &str = "wakebridge";
/// The ledger's file name.
pub const DB_FILE_NAME: &str = "wakebridge.db";

/// `$XDG_STATE_HOME/wakebridge/wakebridge.db`, else `$HOME/.local/state/wakebridge/wakebridge.db`.
/// Per the XDG spec an empty or relative `XDG_STATE_HOME` is ignored. `None` when neither
/// variable gives an absolute directory.
pub fn db_path_from(xdg_state_home: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    let absolute =
        |value: Option<OsString>| value.map(PathBuf::from).filter(|path| path.is_absolute());
    let state_home = absolute(xdg_state_home)
        .or_else(|| absolute(home).map(|home| home.join(".local").join("state")))?;
    Some(state_home.join(STATE_DIR_NAME).join(DB_FILE_NAME))
}

/// Display helper: the file name a "move it aside" hint should suggest.
pub fn aside_name(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".corrupt");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefers_xdg_state_home() {
        let path = db_path_from(Some("/x/state".into()), Some("/home/u".into()));
        assert_eq!(
            path,
            Some(PathBuf::from("/x/state/wakebridge/wakebridge.db"))
        );
    }

    #[test]
    fn falls_back_to_home_local_state() {
        let path = db_path_from(None, Some("/home/u".into()));
        assert_eq!(
            path,
            Some(PathBuf::from(
                "/home/u/.local/state/wakebridge/wakebridge.db"
            ))
        );
    }

    #[test]
    fn ignores_empty_or_relative_xdg_state_home() {
        for bad in ["", "relative/state"] {
            let path = db_path_from(Some(bad.into()), Some("/home/u".into()));
            assert_eq!(
                path,
                Some(PathBuf::from(
                    "/home/u/.local/state/wakebridge/wakebridge.db"
                ))
            );
        }
    }

    #[test]
    fn none_without_any_absolute_directory() {
        assert_eq!(db_path_from(None, None), None);
        assert_eq!(db_path_from(Some("".into()), Some("".into())), None);
    }
}
