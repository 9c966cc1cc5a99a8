//! Everything wakebridge knows about Claude Code as it really is: its session registry,
//! transcript records, what its screen shows (the input line), and the trust flag in its config.

pub mod home;
pub mod registry;
pub mod screen;
pub mod transcript;
pub mod trust;
