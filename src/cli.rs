//! The command line: `wakebridge serve` (also reachable with no subcommand, flag-compatible with
//! the Python bridge) and the verbs sessions and operators use. Parsing only; each verb's work
//! lives in its own module.

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::config::{self, Flags, ProcessEnv};

#[derive(Debug, Parser)]
#[command(
    name = "wakebridge",
    version,
    about = "Keeps AI coding agent sessions working: wakes, nudges and context warnings for Claude Code in tmux/zellij",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// With no subcommand, run the daemon (flags as the Python bridge's).
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the daemon: receive bus webhooks, spool them, wake idle sessions.
    Serve(ServeArgs),
}

/// Flags of `serve`. Values are parsed after clap so that a bad environment value never breaks
/// `--help`, and so flag and environment errors read alike.
#[derive(Debug, Args, Default)]
pub struct ServeArgs {
    /// TOML config file (default: $XDG_CONFIG_HOME/wakebridge/config.toml when it exists).
    #[arg(long, value_name = "PATH")]
    config: Option<std::path::PathBuf>,
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
    fn flags(self) -> Flags {
        Flags {
            config: self.config,
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
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Serve(args)) => serve(args),
        None => serve(cli.serve),
    }
}

fn serve(args: ServeArgs) -> ExitCode {
    let env = ProcessEnv;
    let config = match config::resolve(&args.flags(), &env) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("wakebridge: {e}");
            return ExitCode::from(2);
        }
    };
    init_logging(config.debug);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("wakebridge: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let app = match App::build(config, &env).await {
            Ok(app) => app,
            Err(e) => {
                tracing::error!("{e}");
                eprintln!("wakebridge: {e}");
                return ExitCode::FAILURE;
            }
        };
        let shutdown = CancellationToken::new();
        tokio::spawn(stop_on_signal(shutdown.clone()));
        match app.run(shutdown).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("wakebridge: {e}");
                ExitCode::FAILURE
            }
        }
    })
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

/// Logs go to stderr (launchd/systemd capture it). `DEV_MODE` turns on debug; otherwise
/// `RUST_LOG` decides, defaulting to info.
pub fn init_logging(debug: bool) {
    use tracing_subscriber::EnvFilter;
    let filter = if debug {
        EnvFilter::new("debug")
    } else {
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"))
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
