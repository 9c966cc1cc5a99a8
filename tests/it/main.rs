//! The integration suite: one binary, real servers on 127.0.0.1:0, real files, real processes,
//! real tmux on private sockets.

// A test's helpers may unwrap and panic: a failure is a failed test with its location. (The
// crate's lints forbid both in production code; clippy.toml exempts #[test] fns, this the rest.)
// Its own HTTP clients have reqwest's fallback TLS provider, which `http_client` is for.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

mod bare;
mod budget;
mod bus_registration;
mod claude_install;
mod codex;
mod codex_day;
mod config_verb;
mod context;
mod context_monitor;
mod crash;
mod day;
mod doctor;
mod faults;
mod fleet;
mod fuzz_smoke;
mod http_hook;
mod http_host;
mod inbox;
mod launch;
mod layout;
mod ledger;
mod limits;
mod manual;
mod mux;
mod notify;
mod observability;
mod openapi;
mod owed;
mod page;
mod pause;
mod process;
mod real_bus;
mod registration;
mod rewind;
mod service;
mod session;
mod spool_files;
mod status;
mod store;
mod wake_dir;
mod wake_path;
mod zellij;
