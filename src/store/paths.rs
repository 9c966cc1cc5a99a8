//! The ledger's file names. Where it lives is the configuration's business (`config::Paths`).

use std::path::{Path, PathBuf};

/// Directory under the state home that holds wakebridge's files.
pub const STATE_DIR_NAME: &str = "wakebridge";
/// The ledger's file name.
pub const DB_FILE_NAME: &str = "wakebridge.db";

/// Display helper: the file name a "move it aside" hint should suggest.
pub fn aside_name(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".corrupt");
    PathBuf::from(name)
}
