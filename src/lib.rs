//! wakebridge keeps AI coding agent sessions working unattended: it wakes idle sessions when a
//! bus message arrives for them, nudges sessions that stopped, and warns sessions whose context
//! window is filling up. See `docs/design.md` for the map of how the modules fit together.

pub mod app;
pub mod bus;
pub mod cli;
pub mod client;
pub mod config;
pub mod context;
pub mod cooldown;
pub mod deadline;
pub mod dedupe;
pub mod deliver;
pub mod event;
pub mod gate;
pub mod http;
pub mod launch;
pub mod logging;
pub mod mux;
pub mod nudge;
pub mod prompt_line;
pub mod pyjson;
pub mod ratelimit;
pub mod signature;
pub mod singleton;
pub mod spool;
pub mod status;
pub mod store;
pub mod target;
pub mod tasks;
pub mod telemetry;
pub mod transcript;
pub mod wake;
