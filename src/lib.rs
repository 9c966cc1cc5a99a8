//! wakebridge keeps AI coding agent sessions working unattended: it wakes idle sessions when a
//! bus message arrives for them, nudges sessions that stopped, and warns sessions whose context
//! window is filling up. See `docs/design.md` for the map of how the modules fit together.

pub mod app;
pub mod bus;
pub mod claude;
pub mod cli;
pub mod config;
pub mod context;
pub mod deadline;
pub mod delivery;
pub mod env;
pub mod http;
pub mod launch;
pub mod mux;
pub mod nudge;
pub mod private_fs;
pub mod spool;
pub mod store;
pub mod telemetry;
pub mod wakedir;
pub mod wire;
