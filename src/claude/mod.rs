//! Everything wakebridge knows about Claude Code as it really is, in one place so that every
//! feature reads it the same way: where its config lives ([`home`]), its live session registry
//! ([`registry`]), each session's inbox socket ([`inbox`]), its hook payloads and events
//! ([`hooks`]), its transcript records
//! ([`transcript`]), what its screen shows ([`screen`]), its user settings file as `wakebridge
//! claude install` edits it ([`settings`]), and the trust flag in its config ([`trust`]).
//! Nothing here decides what to do about what it reads.

pub mod home;
pub mod hooks;
pub mod inbox;
pub mod limits;
pub mod registry;
pub(crate) mod screen;
pub mod settings;
pub mod transcript;
pub(crate) mod trust;
