//! wakebridge keeps AI coding agent sessions working unattended: it wakes idle sessions when a
//! bus message arrives for them, nudges sessions that stopped, and warns sessions whose context
//! window is filling up. See `docs/design.md` for the map of how the modules fit together.

pub mod config;
pub mod context;
pub mod deadline;
pub mod event;
pub mod pyjson;
pub mod signature;
pub mod spool;
pub mod target;
pub mod tasks;
pub mod transcript;
