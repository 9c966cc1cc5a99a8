//! `wakebridge serve` (also `wakebridge` with no subcommand): the Python bridge's flags, the
//! daemon's start, its signals and its exit codes (2 when a restart cannot help, 1 when it may).

use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

use crate::app::{App, Validated};
use crate::config::Flags;
use crate::env::Env;

pub fn serve(flags: Flags) -> ExitCode {
    let env = Env::process();
    crate::app::limit_malloc_arenas(&env);
    // Before logging starts, so a refusal is stderr's first line, word for word what
    // `config --check` prints for the same file.
    let settings = match Validated::resolve(&flags, &env) {
        Ok(settings) => settings,
        Err(e) => return super::refused(e),
    };
    crate::telemetry::logging::init(settings.config.debug, &env);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build();
    let code = runtime.map(|runtime| {
        runtime.block_on(async move {
            let app = match App::build(settings, &env).await {
                Ok(app) => app,
                Err(e) => {
                    tracing::error!("{e}");
                    crate::errln!("wakebridge: {e}");
                    return ExitCode::from(e.exit_code());
                }
            };
            let shutdown = CancellationToken::new();
            tokio::spawn(stop_on_signal(shutdown.clone()));
            let Err(e) = app.run(shutdown).await else {
                return ExitCode::SUCCESS;
            };
            crate::errln!("wakebridge: {e}");
            ExitCode::FAILURE
        })
    });
    crate::telemetry::logging::flush(crate::telemetry::logging::FLUSH_BUDGET);
    code.unwrap_or_else(|e| {
        crate::errln!("wakebridge: cannot start the async runtime: {e}");
        ExitCode::FAILURE
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
