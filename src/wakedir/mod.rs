//! The wake dir contract shared with the Python agent-event-bus bridge and CLI: the
//! `panes.json` session → pane mapping, the `<sid>.busy` markers, the wake dir's place and
//! modes, and pane detection from the environment.

pub mod markers;
pub(crate) mod panes;
pub mod printable;
pub mod reader;
pub mod target;
pub(crate) mod writer;

pub use crate::private_fs::ensure_dir as ensure_wake_dir;
pub use target::detect_target;

/// The default wake dir relative to `$HOME`, the Python bridge's and CLI's. Every writer asserts
/// its 0700 mode (`ensure_wake_dir`): it holds full event payloads.
pub const DEFAULT_WAKE_DIR_UNDER_HOME: &str = ".claude/contrib/agent-event-bus/wake";
pub use markers::{clear_busy, is_busy, set_busy};
pub use panes::{PANES_FILE, entry_json, parse_target};
pub use reader::{PANES_READ_CAP_CHARS, PanesReader};
pub use writer::{PanesWriteError, clear_entry, set_entry};
