//! The wake dir itself: its default place under `$HOME` (the Python bridge's) and the
//! `mkdir -p` + `chmod 0700` every writer performs: it holds full event payloads, so its mode is
//! asserted on every write rather than trusted from creation.

use std::path::Path;

/// The default wake dir relative to `$HOME`, shared with the Python bridge and CLI.
pub const DEFAULT_WAKE_DIR_UNDER_HOME: &str = ".claude/contrib/agent-event-bus/wake";
/// `mkdir -p` the wake dir and narrow it to 0700, whatever mode it had.
pub fn ensure_wake_dir(wake_dir: &Path) -> std::io::Result<()> {
    crate::private_fs::ensure_dir(wake_dir)
}
