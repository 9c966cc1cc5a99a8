//! wakebridge keeps AI coding agent sessions working unattended: it wakes idle sessions when a
//! bus message arrives for them, nudges sessions that stopped, and warns sessions whose context
//! window is filling up.
//!
//! # Layout
//!
//! Four groups; imports point down the list, and within a group a module uses only those after
//! it (`tests/it/layout.rs` checks). `docs/design.md` has the same map file by file.
//!
//! ```text
//! edges: where work starts
//!   main.rs        the binary: calls cli::main, and answers libm's `pow`
//!   cli/           clap types and dispatch, one file per verb family
//!   app/           App::build and App::run: locks, listener, background tasks, shutdown
//!   http/          router, guards, the one status mapping, one file per route family
//! features: what wakebridge does besides delivering
//!   notify/        telling a human: the rate limit and the words; task.rs sends
//!   fleet/         every machine's sessions through the bus: presence, signed status, /fleet
//!   bus/           the agent-event-bus MCP client; registration.rs (the keeper task)
//!   delivery/      Deliverer: a bus event's scope, dedupe, spool, the gate, ledger row
//!   session/       the session as the unit: its value, the one decision, the gate, the loop
//!   context/       context-window figures, thresholds, statusline; a session's followed.rs
//!   budget/        the usage windows from the status line, and what they mean for nudges
//!   rewind/        the [rewind] message check and the cleared screen; restart.rs
//!   launch/        starting an agent in tmux
//! pipeline: one path from an event to a pane
//!   spool/         the drain-compatible per-session spool
//!   store/         the SQLite ledger
//!   mux/           the one way to type into a pane (tmux, zellij)
//! leaves: vocabularies and helpers that know nothing of the groups above
//!   api.rs         the typed /health and /sessions views
//!   config/        defaults < file < env < flags into a validated Config
//!   agent/         the seam: which agent a session runs, and each agent's answer to what differs
//!   codex/         Codex CLI as it is: home, hooks and their trust, control socket, rollout
//!   claude/        Claude Code as it is: home, hooks, transcript, screen, settings, inbox
//!   reading/       what an agent says, in words of none: hooks, transcripts, screens, limits
//!   wakedir/       the wake dir shared with the Python bridge
//!   wire/          what the bus sends
//!   telemetry/     Prometheus metrics, the log writer thread, warnings
//!   clock.rs       wall-clock time and its units
//!   deadline.rs    one monotonic budget per unit of work
//!   env.rs         the one environment lookup
//!   private_fs.rs  0600/0700 modes, no-follow opens, flock, write-temp-then-rename
//! ```

pub mod agent;
pub mod api;
pub mod app;
pub mod budget;
pub mod bus;
pub mod claude;
pub mod cli;
pub mod clock;
pub mod codex;
pub mod config;
pub mod context;
pub mod deadline;
pub mod delivery;
pub mod env;
pub mod fleet;
pub mod http;
pub mod launch;
pub mod mux;
pub mod notify;
pub(crate) mod private_fs;
pub mod reading;
pub mod rewind;
pub mod session;
pub mod spool;
pub mod store;
pub mod telemetry;
pub mod wakedir;
pub mod wire;

/// Gives each enum named an `as_str`: its strum (kebab-case) name, its one spelling wherever it
/// is stored, labelled or shown.
#[macro_export]
macro_rules! strum_as_str {
    ($($kind:ty),*) => {$(
        impl $kind {
            pub fn as_str(self) -> &'static str {
                self.into()
            }
        }
    )*};
}

/// An outbound HTTP client answering within `timeout`. TLS (an https notify hook or bus) runs on
/// rustls with ring, installed here as the process's provider before the first client needs it.
#[allow(clippy::disallowed_methods)] // the one place allowed to (clippy.toml)
pub(crate) fn http_client(timeout: std::time::Duration) -> reqwest::Result<reqwest::Client> {
    // Already installed (by an earlier client) is as good.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().timeout(timeout).build()
}

/// Locks `mutex` through poisoning: a thread panicked mid-update, but the state is usable.
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
