//! The wake dir contract shared with the Python agent-event-bus bridge and CLI: the
//! `panes.json` session → pane mapping (value rules, reader, writer), the `<sid>.busy`
//! turn-state markers, the wake dir's location and modes, and pane detection from the
//! environment. The wake gate composes these with the multiplexer backends.

pub(crate) mod detect;
pub(crate) mod dir;
pub mod markers;
pub(crate) mod panes;
pub(crate) mod pretty;
pub mod printable;
pub mod reader;
pub mod target;
pub(crate) mod writer;

pub use detect::detect_target;
pub use dir::ensure_wake_dir;
pub use markers::{MarkerError, clear_busy, is_busy, set_busy};
pub use panes::{InvalidTarget, PANES_FILE, PANES_LOCK_FILE, entry_json, parse_target};
pub use printable::{is_printable, is_valid_string};
pub use reader::{PANES_READ_CAP_CHARS, PanesReader, Resolution};
pub use writer::{ClearOutcome, PanesWriteError, SetOutcome, clear_entry, set_entry};
