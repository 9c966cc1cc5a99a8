//! The integration suite: one binary, real servers on 127.0.0.1:0, real files, real processes,
//! real tmux on private sockets.

mod bus_registration;
mod context;
mod context_monitor;
mod crash;
mod faults;
mod fuzz_smoke;
mod harness;
mod http_hook;
mod http_host;
mod launch;
mod ledger;
mod mux;
mod nudger;
mod openapi;
mod process;
mod registration;
mod spool_files;
#[path = "../support/stand_in.rs"]
mod stand_in;
mod store;
#[path = "../support/stub_bus.rs"]
mod stub_bus;
#[path = "../support/tmux_server.rs"]
mod tmux_server;
mod wake_dir;
mod wake_path;
mod zellij;
