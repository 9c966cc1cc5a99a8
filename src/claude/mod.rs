//! Everything wakebridge knows about Claude Code as it really is, in one place so that every
//! feature reads it the same way: its config home, session registry, inbox, hooks, transcripts,
//! screen, usage limits, settings file and trust flag. Nothing here decides what to do.

pub mod home;
pub mod hooks;
pub mod inbox;
pub mod limits;
pub mod registry;
pub(crate) mod screen;
pub mod settings;
pub mod transcript;
pub(crate) mod trust;
pub mod turn;
