//! The command line: `wakebridge serve` (also with no subcommand, flag-compatible with the
//! Python bridge) and the verbs sessions and operators use. Parsing only; each verb's work
//! lives in its own module.

pub(crate) mod claude;
pub(crate) mod client;
pub(crate) mod codex;
pub(crate) mod context;
pub(crate) mod doctor;
pub(crate) mod edit;
pub mod fleet;
pub(crate) mod glance;
pub mod hook;
pub mod launch;
pub(crate) mod manual;
pub(crate) mod prefix;
pub(crate) mod serve;
pub mod service;
pub mod session;
pub(crate) mod show_config;
pub(crate) mod statusline;

use std::path::Path;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::{self, Flags};
use crate::env::Env;
use context::{run_context, run_statusline};
use session::{run_panes, run_wake_state};

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
    serve: Flags,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the daemon: receive bus webhooks, spool them, wake idle sessions.
    Serve(Flags),
    /// Map (set) or unmap (clear) this session's pane in panes.json.
    #[command(subcommand)]
    Panes(session::PanesCommand),
    /// Mark this session busy (a turn is running) or idle.
    WakeState(session::WakeStateArgs),
    /// Claude Code hook entry point: reads the hook JSON on stdin and does the right thing.
    Hook(hook::HookArgs),
    /// Ask the running daemon to wake a session (POST /wake).
    Wake(client::WakeArgs),
    /// Ask the running daemon for a clean context window for this session (POST /rewind):
    /// `/clear` and the re-hydration prompt at its next idle moment.
    Rewind(client::RewindArgs),
    /// Every session at a glance (GET /sessions, GET /health): state, context, next nudge.
    Status(client::StatusArgs),
    /// Drop one session from the daemon's ledger and views (POST /forget).
    Forget(client::ForgetArgs),
    /// Stop wakebridge doing anything for sessions (POST /pause): no wake, nudge, warning,
    /// resume or rewind; bus events wait, owed, until unpaused. Kept across restarts.
    Pause(client::PauseArgs),
    /// Lift a pause (POST /unpause); what waited is paid at once.
    Unpause(client::UnpauseArgs),
    /// Print how full a session's context window is.
    Context(context::ContextArgs),
    /// Claude Code status-line command: hands context figures to the daemon, prints one line.
    Statusline(context::StatuslineArgs),
    /// Start an agent (default `claude`) in a new tmux pane and get it past its first-run screens.
    Launch(launch::LaunchArgs),
    /// Check every link a wake needs, one line each with the fix, and each session's inbox;
    /// exit 0 only when a wake would work.
    Doctor(client::UrlArg),
    /// Print the effective configuration and where each value came from; --check only
    /// validates it (exit 0 or 2), e.g. as a supervisor's ExecStartPre.
    Config(show_config::ConfigArgs),
    /// Print shell completions for bash, zsh, fish, elvish or powershell.
    Completions(manual::CompletionsArgs),
    /// Print the man page (or write one per verb with --out-dir).
    Man(manual::ManArgs),
    /// Wire Claude Code to this binary in its settings.json (`install`), or take it out again
    /// (`uninstall`).
    #[command(subcommand)]
    Claude(claude::ClaudeCommand),
    /// Wire Codex CLI to this binary in its hooks.json, and with --trust-hooks approve the hooks
    /// in its config.toml (`install`), or take both out again (`uninstall`).
    #[command(subcommand)]
    Codex(codex::CodexCommand),
    /// Run the daemon under launchd or systemd: install, uninstall, status.
    #[command(subcommand)]
    Service(service::ServiceCommand),
}

pub fn main() -> ExitCode {
    crate::telemetry::logging::ensure_standard_descriptors();
    // `wakebridge hook` runs on every tool call of every Claude Code session: it is answered
    // before the whole command line is built (see `hook::fast_main`).
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let Some(code) = hook::fast_main(&args) {
        return code;
    }
    let cli = Cli::parse();
    if cli.command.is_some() && cli.serve != Flags::default() {
        // `wakebridge --port 9 status` would otherwise drop the flag without a word.
        crate::errln!(
            "wakebridge: the daemon's flags (--port, --backend, ...) go with `serve` or with no subcommand; only --config goes before a subcommand"
        );
        return ExitCode::from(2);
    }
    // Every verb reads the configuration `serve` reads: defaults < file < environment < flags.
    let config = cli.config.clone();
    let resolved = |wake_dir: Option<&Path>| resolve(config.clone(), wake_dir);
    let with = |flags: Flags| Flags {
        config: config.clone(),
        ..flags
    };
    let Some(command) = cli.command else {
        return serve::serve(with(cli.serve));
    };
    match command {
        Command::Serve(args) => serve::serve(with(args)),
        Command::Panes(command) => with_config(resolved(command.wake_dir()), |c| {
            run_panes(&command, &c.paths.wake_dir)
        }),
        Command::WakeState(args) => with_config(resolved(args.session.wake_dir.as_deref()), |c| {
            run_wake_state(&args, &c.paths.wake_dir)
        }),
        // A hook never fails the agent: a configuration error is reported and the hook skipped.
        Command::Hook(args) => hook::run(&args, resolved(args.wake_dir.as_deref())),
        Command::Wake(args) => with_config(resolved(None), |c| client::wake(c, &args)),
        Command::Rewind(args) => with_config(resolved(None), |c| client::rewind(c, &args)),
        Command::Status(args) => with_config(resolved(None), |c| client::status(c, &args)),
        Command::Forget(args) => with_config(resolved(None), |c| client::forget(c, &args)),
        Command::Pause(args) => with_config(resolved(None), |c| client::pause(c, &args)),
        Command::Unpause(args) => with_config(resolved(None), |c| client::unpause(c, &args)),
        Command::Context(args) => with_config(resolved(None), |c| run_context(&args, c)),
        Command::Statusline(args) => run_statusline(&args, resolved(args.wake_dir.as_deref())),
        Command::Launch(args) => {
            with_config(resolved(args.wake_dir.as_deref()), |c| launch::run(args, c))
        }
        Command::Doctor(args) => {
            with_config(resolved(None), |c| doctor::run(c, args.url.as_deref()))
        }
        Command::Config(args) => show_config::run(args.check, &with(args.serve), &Env::process()),
        Command::Completions(args) => manual::completions(&args),
        Command::Man(args) => manual::man(&args),
        // No configuration needed: the settings file is where Claude Code's environment says.
        Command::Claude(command) => claude::run(&command, &Env::process()),
        Command::Codex(command) => codex::run(&command, &Env::process()),
        Command::Service(command) => service::run(&command, resolved(None), config.as_deref()),
    }
}

/// The path to write where Claude Code's hooks and the service manager will start this binary:
/// the `wakebridge` PATH finds first when it is this very file (a Homebrew, Linuxbrew or Nix
/// link outlives an upgrade; `current_exe` names the versioned file behind it), else
/// `current_exe`.
pub(crate) fn own_binary(env: &Env) -> std::io::Result<std::path::PathBuf> {
    let exe = std::env::current_exe()?;
    let real = std::fs::canonicalize(&exe).unwrap_or_else(|_| exe.clone());
    let path = env.get("PATH").unwrap_or_default();
    let first = std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join("wakebridge"))
        .find(|candidate| candidate.is_file());
    Ok(match first {
        Some(found) if std::fs::canonicalize(&found).is_ok_and(|f| f == real) => found,
        _ => exe,
    })
}

/// On a current-thread runtime of its own.
pub(crate) fn block_on<F: Future>(future: F) -> std::io::Result<F::Output> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    Ok(runtime.block_on(future))
}

/// The configuration `serve` would read with `--config` and a verb's `--wake-dir` as flags.
fn resolve(
    config: Option<std::path::PathBuf>,
    wake_dir: Option<&Path>,
) -> Result<config::Config, config::ConfigError> {
    let wake_dir = wake_dir.map(|dir| dir.to_string_lossy().into_owned());
    let flags = Flags {
        config,
        wake_dir,
        ..Flags::default()
    };
    config::resolve(&flags, &Env::process())
}

/// Runs `verb` with the resolved configuration, or says what is wrong with it ([`refused`]).
fn with_config(
    config: Result<config::Config, config::ConfigError>,
    verb: impl FnOnce(&config::Config) -> ExitCode,
) -> ExitCode {
    config.map_or_else(refused, |config| verb(&config))
}

/// A configuration that cannot be used, said the same way by every verb (`serve`, `config
/// --check`): exit 2, as it needs a human, so a supervisor should not retry.
fn refused(error: impl std::fmt::Display) -> ExitCode {
    crate::errln!("wakebridge: {error}");
    ExitCode::from(2)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// Every command under `cmd`, itself included, with its path of names.
    fn every_command(cmd: &clap::Command, path: String, out: &mut Vec<(String, clap::Command)>) {
        out.push((path.clone(), cmd.clone()));
        for sub in cmd.get_subcommands() {
            every_command(sub, format!("{path} {}", sub.get_name()), out);
        }
    }

    #[test]
    fn a_session_is_spelled_session_with_session_id_as_its_alias() {
        let mut commands = Vec::new();
        every_command(&Cli::command(), "wakebridge".into(), &mut commands);
        let mut with_session = Vec::new();
        for (path, cmd) in &commands {
            for arg in cmd.get_arguments() {
                assert_ne!(
                    arg.get_long(),
                    Some("session-id"),
                    "{path}: spell it --session (alias session-id)"
                );
                if arg.get_long() == Some("session") {
                    let aliases = arg.get_all_aliases().unwrap_or_default();
                    assert!(aliases.contains(&"session-id"), "{path}: {aliases:?}");
                    with_session.push(path.clone());
                }
            }
        }
        for verb in [
            "panes set",
            "panes clear",
            "wake-state",
            "rewind",
            "context",
            "launch",
        ] {
            let path = format!("wakebridge {verb}");
            assert!(with_session.contains(&path), "{path}: {with_session:?}");
        }
    }

    #[test]
    fn both_spellings_name_the_same_session() {
        for flag in ["--session", "--session-id"] {
            let cli = Cli::try_parse_from(["wakebridge", "rewind", flag, "3b9e01"]);
            let text = format!("{cli:?}");
            assert!(
                matches!(
                    cli,
                    Ok(Cli {
                        command: Some(Command::Rewind(_)),
                        ..
                    })
                ),
                "{text}"
            );
            assert!(text.contains("\"3b9e01\""), "{text}");
            let cli = Cli::try_parse_from(["wakebridge", "wake-state", "busy", flag, "s1"]);
            assert!(format!("{cli:?}").contains("\"s1\""), "{cli:?}");
        }
    }
}
