//! The integration suite: one binary, real servers on 127.0.0.1:0, real files, real processes,
//! real tmux on private sockets.

mod crash;
mod harness;
mod http_hook;
mod http_host;
mod ledger;
mod openapi;
mod process;
mod registration;
mod spool_files;
#[path = "../support/stub_bus.rs"]
mod stub_bus;
#[path = "../support/tmux_server.rs"]
mod tmux_server;
mod wake_path;
