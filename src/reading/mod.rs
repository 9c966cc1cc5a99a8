//! What an agent says of itself, in words of no agent: what a hook event means for its turn,
//! what a transcript line and a screen capture read as, a usage limit and its reset, the
//! sessions it lists, the inbox it announces. `claude/` and `codex/` read their own files,
//! hooks and screens into these; `session/`, `delivery/`, `context/`, `budget/` and the views
//! decide by them alone.

pub mod hook;
pub mod inbox;
pub mod limit;
pub mod registry;
pub mod screen;
pub mod transcript;
