//! The wake dir's default place under `$HOME`, the Python bridge's. Every writer asserts its
//! 0700 mode (`ensure_wake_dir`): it holds full event payloads.

/// The default wake dir relative to `$HOME`, shared with the Python bridge and CLI.
pub const DEFAULT_WAKE_DIR_UNDER_HOME: &str = ".claude/contrib/agent-event-bus/wake";
