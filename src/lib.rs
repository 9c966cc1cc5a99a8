//! wakebridge keeps AI coding agent sessions working unattended: it wakes idle sessions when a
//! bus message arrives for them, nudges sessions that stopped, and warns sessions whose context
//! window is filling up.
//!
//! # Layout
//!
//! Four groups, and dependencies point down the list: the edges use the features, the features
//! use the delivery pipeline, the pipeline uses the leaves. Within a group, a module uses only
//! the modules listed after it. Every module's own `//!` paragraph says what it owns and what it
//! does not; `docs/design.md` has the same map file by file.
//!
//! ```text
//! edges: where work starts
//!   main.rs        the binary: calls cli::main, nothing else
//!   cli/           clap types and dispatch; one file per verb family: serve, session (panes,
//!                  wake-state), hook, client (wake, rewind, status, forget), context (context,
//!                  statusline), launch, claude (install, uninstall), doctor, show_config, manual
//!                  (completions, man), service/ (install, uninstall, status: render.rs pure,
//!                  manager.rs); glance (the status view) and prefix (ids), both pure
//!   app/           App::build(Validated, &Env) and App::run: singleton locks, listener, background
//!                  tasks, ordered shutdown (singleton.rs: the Python bridge's lock paths;
//!                  validated.rs: every feature's settings checked once, for serve and config)
//!   http/          router and ROUTES; guards (Host, JSON, size); error.rs (the one status
//!                  mapping); state.rs (AppState); status.rs (/sessions and `wakebridge status`);
//!                  one file per route family: hook, wake, rewind, forget, health, sessions
//! features: what wakebridge does besides delivering (tasks app starts; the launcher, run by cli)
//!   notify/        telling a human: NotifyConfig, the rate limit and the words (pure); task.rs
//!                  (the sender: webhook POST, bus event)
//!   bus/           the agent-event-bus MCP client; registration.rs (the keeper task)
//!   context/       context-window figures: follow, window, thresholds, statefile, statusline,
//!                  monitor (no scheduling); task.rs (the monitor inside serve)
//!   session/       the session as the unit: state.rs (one value per session), decide.rs (the
//!                  one pure decision), observe.rs (the signals and the idle rule), schedule.rs
//!                  (the backoff); task.rs (the loop: nudges, owed wakes no Stop hook paid,
//!                  resumes at a limit's reset, rewinds and restarts)
//!   rewind/        rewinds: RewindConfig and the pure decisions (when due, a cleared screen)
//!   launch/        starting an agent in tmux: mod.rs (the sequence), driver.rs (which key, pure)
//! pipeline: one path from an event to a pane
//!   delivery/      Deliverer: scope, dedupe, spool, gate, ledger row; action.rs (the `action`
//!                  vocabulary), dedupe.rs, cooldown.rs, gate.rs (the one decision to type)
//!   spool/         the drain-compatible per-session spool: files, writer, recover; prune.rs
//!                  (a task)
//!   store/         the SQLite ledger: schema, the group-commit writer thread, records, queries
//!   mux/           the one way to type into a pane: inject (Injector, per-pane lock), tmux/
//!                  (create.rs: the launcher's calls), zellij, process (argv under a Deadline), ps,
//!                  text (KeystrokeText)
//! leaves: vocabularies and helpers that know nothing of the groups above
//!   api.rs         the typed /health and /sessions views (SessionState: one state per
//!                  session), served by the daemon, read by the client verbs
//!   config/        defaults (config/default.toml) < file < env < flags into a validated Config:
//!                  layers, names, duration, topology, hosts, secret (secret_file); tests.rs
//!   claude/        Claude Code as it is: home, registry, hooks, transcript, screen/ (first_run.rs,
//!                  fixtures.rs for tests), trust, settings (install's merge of settings.json)
//!   wakedir/       the wake dir shared with the Python bridge: panes, reader, writer, markers,
//!                  target, detect, dir, pretty, printable
//!   wire/          what the bus sends: event, session_id, signature, pyjson
//!   telemetry/     Prometheus metrics; logging.rs (the log writer thread, outln!/errln!); warn.rs
//!   clock.rs       wall-clock time: now, and its conversions between units
//!   deadline.rs    one monotonic budget per unit of work
//!   env.rs         the one environment lookup
//!   private_fs.rs  0600/0700 modes, no-follow opens, flock, write-temp-then-rename
//! ```

pub mod api;
pub mod app;
pub mod bus;
pub mod claude;
pub mod cli;
pub mod clock;
pub mod config;
pub mod context;
pub mod deadline;
pub mod delivery;
pub mod env;
pub mod http;
pub mod launch;
pub mod mux;
pub mod notify;
pub(crate) mod private_fs;
pub mod rewind;
pub mod session;
pub mod spool;
pub mod store;
pub mod telemetry;
pub mod wakedir;
pub mod wire;

/// Locks `mutex` through poisoning: that only means a thread panicked mid-update; the state is
/// still usable.
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
