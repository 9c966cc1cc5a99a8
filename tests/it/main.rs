//! The integration suite: one binary, real servers on 127.0.0.1:0, real files, real processes.

mod harness;
mod http_hook;
mod http_host;
mod openapi;
mod process;
mod spool_files;
