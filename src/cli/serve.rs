//! `wakebridge serve` (also `wakebridge` with no subcommand): the Python bridge's flags, the
//! daemon's start, its signals and its exit codes (2 when a restart cannot help, 1 when it may).

use std::process::ExitCode;

use clap::Args;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::config::{self, Flags};
use crate::env::Env;

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
    /// URL the bus POSTs to [env: AGENT_EVENT_BUS_BRIDGE_HOOK_URL] [default: http://127.0.0.1:PORT/hook]
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
    pub fn given(&self) -> bool {
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

    pub fn flags(self, config: Option<std::path::PathBuf>) -> Flags {
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

pub fn serve(flags: Flags) -> ExitCode {
    let env = Env::process();
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
