//! The command line: `wakebridge serve` (also reachable with no subcommand, flag-compatible with
//! the Python bridge) and the verbs sessions and operators use. Parsing only; each verb's work
//! lives in its own module.

pub mod client;
pub mod context;
pub mod hook;
pub mod launch;
pub mod session;
use std::path::Path;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::cli::context::{ContextArgs, StatuslineArgs, run_context, run_statusline};
use crate::cli::hook::{HookArgs, HookOutcome, run_hook};
use crate::cli::launch::LaunchArgs;
use crate::cli::session::{PanesCommand, WakeStateArgs, run_panes, run_wake_state};
use crate::config::{self, Flags, ProcessEnv};
use crate::store::{Record, SessionSeen, Store, now_unix_ms};

#[derive(Debug, Parser)]
#[command(
    name = "wakebridge",
    version,
    about = "Keeps AI coding agent sessions working: wakes, nudges and context warnings for Claude Code in tmux/zellij"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// TOML config file, for every verb (default: $XDG_CONFIG_HOME/wakebridge/config.toml when
    /// it exists)
    #[arg(long, global = true, value_name = "PATH")]
    config: Option<std::path::PathBuf>,
    /// With no subcommand, run the daemon (flags as the Python bridge's).
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the daemon: receive bus webhooks, spool them, wake idle sessions.
    Serve(ServeArgs),
    /// Map (set) or unmap (clear) this session's pane in panes.json.
    #[command(subcommand)]
    Panes(PanesCommand),
    /// Mark this session busy (a turn is running) or idle.
    WakeState(WakeStateArgs),
    /// Claude Code hook entry point: reads the hook JSON on stdin and does the right thing.
    Hook(HookArgs),
    /// Ask the running daemon to wake a session (POST /wake).
    Wake(WakeArgs),
    /// Show every known session (GET /sessions) as a table.
    Status(StatusArgs),
    /// Print how full a session's context window is.
    Context(ContextArgs),
    /// Claude Code status-line command: hands context figures to the daemon, prints one line.
    Statusline(StatuslineArgs),
    /// Start an agent (default `claude`) in a new tmux pane and get it past its first-run screens.
    Launch(LaunchArgs),
}

#[derive(Debug, Args)]
pub struct WakeArgs {
    /// The bus session id to wake.
    session_id: String,
    /// Skip the busy marker and the cooldown (never the pane mapping, the stale-pane guard, or
    /// the check for text already at the prompt).
    #[arg(long)]
    force: bool,
    /// Type this configured message ([wake.messages]) instead of the wake prompt.
    #[arg(long, value_name = "NAME")]
    message: Option<String>,
    /// The daemon's base URL [default: from the configuration, e.g. http://127.0.0.1:8082]
    #[arg(long)]
    url: Option<String>,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Print the raw JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// The daemon's base URL [default: from the configuration, e.g. http://127.0.0.1:8082]
    #[arg(long)]
    url: Option<String>,
}

/// Flags of `serve`. Values are parsed after clap so that a bad environment value never breaks
/// `--help`, and so flag and environment errors read alike.
#[derive(Debug, Args, Default)]
pub struct ServeArgs {
    /// Listener port [env: AGENT_EVENT_BUS_BRIDGE_PORT] [default: 8082]
    #[arg(long)]
    port: Option<String>,
    /// mux (alias tmux) or spool [env: AGENT_EVENT_BUS_BRIDGE_BACKEND] [default: mux]
    #[arg(long)]
    backend: Option<String>,
    /// Seconds between wakes of one session [env: AGENT_EVENT_BUS_BRIDGE_COOLDOWN] [default: 30]
    #[arg(long)]
    cooldown: Option<String>,
    /// Seconds a busy marker stays fresh; 0 ignores markers, inf never expires [env: AGENT_EVENT_BUS_BRIDGE_BUSY_TTL] [default: 3600]
    #[arg(long = "busy-ttl")]
    busy_ttl: Option<String>,
    /// Wake dir [env: AGENT_EVENT_BUS_WAKE_DIR] [default: ~/.claude/contrib/agent-event-bus/wake]
    #[arg(long = "wake-dir")]
    wake_dir: Option<String>,
    /// The bus's MCP URL [env: AGENT_EVENT_BUS_URL] [default: http://127.0.0.1:8080/mcp]
    #[arg(long = "bus-url")]
    bus_url: Option<String>,
    /// URL the bus POSTs to [env: AGENT_EVENT_BUS_BRIDGE_HOOK_URL] [default: http://127.0.0.1:<port>/hook]
    #[arg(long = "hook-url")]
    hook_url: Option<String>,
    /// Listen address, an IP or localhost [env: AGENT_EVENT_BUS_BRIDGE_BIND] [default: derived from the hook URL]
    #[arg(long)]
    bind: Option<String>,
    /// Extra Host values to accept, comma-separated [env: AGENT_EVENT_BUS_BRIDGE_ALLOWED_HOSTS]
    #[arg(long = "allowed-hosts")]
    allowed_hosts: Option<String>,
}

impl ServeArgs {
    /// Whether any of the flags was given.
    fn given(&self) -> bool {
        let Self {
            port,
            backend,
            cooldown,
            busy_ttl,
            wake_dir,
            bus_url,
            hook_url,
            bind,
            allowed_hosts,
        } = self;
        [
            port,
            backend,
            cooldown,
            busy_ttl,
            wake_dir,
            bus_url,
            hook_url,
            bind,
            allowed_hosts,
        ]
        .iter()
        .any(|flag| flag.is_some())
    }

    fn flags(self, config: Option<std::path::PathBuf>) -> Flags {
        Flags {
            config,
            port: self.port,
            backend: self.backend,
            cooldown: self.cooldown,
            busy_ttl: self.busy_ttl,
            wake_dir: self.wake_dir,
            bus_url: self.bus_url,
            hook_url: self.hook_url,
            bind: self.bind,
            allowed_hosts: self.allowed_hosts,
        }
    }
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    crate::telemetry::logging::ensure_standard_descriptors();
    let cli = Cli::parse();
    if cli.command.is_some() && cli.serve.given() {
        // `wakebridge --port 9 status` would otherwise drop the flag without a word.
        crate::errln!(
            "wakebridge: the daemon's flags (--port, --backend, ...) go with `serve` or with no subcommand; only --config goes before a subcommand"
        );
        return ExitCode::from(2);
    }
    // Every verb reads the configuration `serve` reads: defaults < file < environment < flags.
    let flags = |wake_dir: Option<&Path>| Flags {
        config: cli.config.clone(),
        wake_dir: wake_dir.map(|dir| dir.to_string_lossy().into_owned()),
        ..Flags::default()
    };
    let resolved = |wake_dir: Option<&Path>| config::resolve(&flags(wake_dir), &ProcessEnv);
    match cli.command {
        Some(Command::Serve(args)) => serve(args.flags(cli.config.clone())),
        None => serve(cli.serve.flags(cli.config.clone())),
        Some(Command::Panes(command)) => with_config(resolved(command.wake_dir()), |c| {
            run_panes(&command, &c.paths.wake_dir)
        }),
        Some(Command::WakeState(args)) => {
            with_config(resolved(args.session.wake_dir.as_deref()), |c| {
                run_wake_state(&args, &c.paths.wake_dir)
            })
        }
        Some(Command::Hook(args)) => {
            // A hook never fails the agent: a configuration error is reported and the hook skipped.
            let config = resolved(args.wake_dir.as_deref()).map_err(|e| e.to_string());
            let wake_dir = config
                .as_ref()
                .map(|c| c.paths.wake_dir.clone())
                .map_err(Clone::clone);
            let ledger = config.map(|c| c.paths.ledger).ok();
            run_hook(&args, wake_dir, move |outcome| {
                record_hook(ledger.as_deref(), outcome)
            })
        }
        Some(Command::Wake(args)) => with_config(resolved(None), |c| {
            client::wake(
                c,
                &args.session_id,
                args.force,
                args.message.as_deref(),
                args.url.as_deref(),
            )
        }),
        Some(Command::Status(args)) => with_config(resolved(None), |c| {
            client::status(c, args.json, args.url.as_deref())
        }),
        Some(Command::Context(args)) => with_config(resolved(None), |c| run_context(&args, c)),
        Some(Command::Statusline(args)) => {
            // The status bar shows whatever the line says, so even a bad configuration gets one.
            match resolved(args.wake_dir.as_deref()) {
                Ok(c) => run_statusline(&args, &c),
                Err(e) => {
                    crate::errln!("wakebridge statusline: {e}");
                    crate::outln!("{}", crate::context::statusline::UNKNOWN_LINE);
                    ExitCode::SUCCESS
                }
            }
        }
        Some(Command::Launch(args)) => with_config(resolved(args.wake_dir.as_deref()), |c| {
            crate::cli::launch::run(args, c)
        }),
    }
}

/// Runs `verb` with the resolved configuration, or says what is wrong with it (exit 2).
fn with_config(
    config: Result<config::Config, config::ConfigError>,
    verb: impl FnOnce(&config::Config) -> ExitCode,
) -> ExitCode {
    match config {
        Ok(config) => verb(&config),
        Err(e) => {
            crate::errln!("wakebridge: {e}");
            ExitCode::from(2)
        }
    }
}

/// Records what a hook saw in the ledger, so the daemon knows the session (scope = local), its
/// transcript and its last hook event (for the nudger). Never fails the hook.
fn record_hook(ledger: Option<&Path>, outcome: &HookOutcome) {
    let (Some(ledger), Some(session_id)) = (ledger, outcome.session_id.clone()) else {
        return;
    };
    if outcome.nothing_new {
        return;
    }
    let seen = SessionSeen {
        session_id,
        cwd: outcome.cwd.clone(),
        transcript_path: outcome.transcript_path.clone(),
        pane: outcome.pane.as_ref().map(ToString::to_string),
        last_hook_event: Some(outcome.ledger_event.clone()),
        seen_at_ms: now_unix_ms(),
    };
    let recorded = Store::record_once(ledger, Record::SessionSeen(seen));
    if let Err(e) = recorded {
        crate::errln!("wakebridge hook: could not record the session in the ledger: {e}");
    }
}

fn serve(flags: Flags) -> ExitCode {
    let env = ProcessEnv;
    let config = match config::resolve(&flags, &env) {
        Ok(c) => c,
        Err(e) => {
            crate::errln!("wakebridge: {e}");
            return ExitCode::from(2);
        }
    };
    crate::telemetry::logging::init(config.debug);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            crate::errln!("wakebridge: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(async move {
        let app = match App::build(config, &env).await {
            Ok(app) => app,
            Err(e) => {
                tracing::error!("{e}");
                crate::errln!("wakebridge: {e}");
                return ExitCode::from(e.exit_code());
            }
        };
        let shutdown = CancellationToken::new();
        tokio::spawn(stop_on_signal(shutdown.clone()));
        match app.run(shutdown).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                crate::errln!("wakebridge: {e}");
                ExitCode::FAILURE
            }
        }
    });
    crate::telemetry::logging::flush(crate::telemetry::logging::FLUSH_BUDGET);
    code
}

/// SIGTERM (supervisors) and SIGINT (a terminal) both mean a graceful stop.
async fn stop_on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::warn!("cannot install signal handlers; stop the daemon with SIGKILL");
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = int.recv() => tracing::info!("SIGINT: shutting down"),
    }
    shutdown.cancel();
}
