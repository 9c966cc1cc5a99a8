//! `wakebridge panes set|clear` and `wakebridge wake-state busy|idle`, with the reference CLI's
//! semantics: the session id from `--session` or the environment ([`SESSION_ID_ENVS`]), exit 2
//! for a missing session id or an invalid target. The file work is `wakedir`'s.

use crate::env::Env;
use crate::wakedir::detect_target;
use crate::wakedir::markers::{MarkerError, clear_busy, clear_busy_if_any, set_busy};
use crate::wakedir::panes::{InvalidTarget, parse_target};
use crate::wakedir::target::PaneTarget;
use crate::wakedir::writer::{PanesWriteError, SetOutcome, clear_entry, set_entry};
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Consulted in this order after `--session`.
pub const SESSION_ID_ENVS: [&str; 2] = ["AGENT_EVENT_BUS_SESSION_ID", "CLAUDE_CODE_SESSION_ID"];
pub const SKIPPED_NO_MUX: &str = "no multiplexer detected";

#[derive(Debug, Clone, Default, clap::Args)]
pub struct SessionArgs {
    /// Bus session id [default: $AGENT_EVENT_BUS_SESSION_ID, then $CLAUDE_CODE_SESSION_ID]
    #[arg(long = "session", alias = "session-id", value_name = "ID")]
    pub session_id: Option<String>,
    /// Wake dir [default: the configuration's, as `serve` uses it]
    #[arg(long, value_name = "DIR")]
    pub wake_dir: Option<PathBuf>,
}

/// `wakebridge panes ...`: the session → pane mapping in `panes.json`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum PanesCommand {
    /// Map this session to its multiplexer pane (detected from the environment unless --mux)
    Set(PanesSetArgs),
    /// Remove this session's mapping, and any mapping on this pane
    Clear(PanesClearArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
pub enum MuxKind {
    Tmux,
    Zellij,
}

#[derive(Debug, Clone, Default, clap::Args)]
pub struct PanesSetArgs {
    #[command(flatten)]
    pub session: SessionArgs,
    /// Multiplexer of an explicit target (otherwise detected from TMUX_PANE / ZELLIJ_*)
    #[arg(long, value_enum, requires = "pane")]
    pub mux: Option<MuxKind>,
    /// Pane id of the explicit target (`%3` for tmux, `0` for zellij)
    #[arg(long, requires = "mux")]
    pub pane: Option<String>,
    /// Multiplexer session name (required for zellij)
    #[arg(long, value_name = "NAME", requires = "mux")]
    pub mux_session: Option<String>,
    /// Keep the busy marker (for SessionStart with source=compact, which fires mid-turn)
    #[arg(long)]
    pub keep_wake_state: bool,
    /// Print the result as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Default, clap::Args)]
pub struct PanesClearArgs {
    #[command(flatten)]
    pub session: SessionArgs,
    /// Do not also remove other sessions' entries on the pane detected from the environment
    #[arg(long)]
    pub keep_pane_entries: bool,
    /// Print the result as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WakeState {
    /// Mid-turn: the bridge spools instead of typing into the pane
    Busy,
    /// Turn over: the bridge may wake the session
    Idle,
}

#[derive(Debug, Clone, clap::Args)]
pub struct WakeStateArgs {
    #[arg(value_enum)]
    pub state: WakeState,
    #[command(flatten)]
    pub session: SessionArgs,
}

pub fn resolve_session_id(flag: Option<&str>, env: &Env) -> Option<String> {
    let vars = SESSION_ID_ENVS.iter().filter_map(|name| env.get(name));
    flag.map(str::to_owned)
        .into_iter()
        .chain(vars)
        .find(|id| !id.is_empty())
}

impl PanesCommand {
    pub fn wake_dir(&self) -> Option<&Path> {
        match self {
            PanesCommand::Set(PanesSetArgs { session, .. })
            | PanesCommand::Clear(PanesClearArgs { session, .. }) => session.wake_dir.as_deref(),
        }
    }
}

pub fn run_panes(command: &PanesCommand, wake_dir: &Path) -> ExitCode {
    let (mut out, mut err) = (std::io::stdout().lock(), std::io::stderr().lock());
    execute_panes(command, wake_dir, &Env::process(), &mut out, &mut err)
}

pub fn run_wake_state(args: &WakeStateArgs, wake_dir: &Path) -> ExitCode {
    let mut err = std::io::stderr().lock();
    execute_wake_state(args, wake_dir, &Env::process(), &mut err)
}

/// `panes set|clear` with injected environment and output (what tests drive).
pub fn execute_panes(
    command: &PanesCommand,
    wake_dir: &Path,
    env: &Env,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> ExitCode {
    let (json, done) = match command {
        PanesCommand::Set(args) => (args.json, panes_set(args, wake_dir, env)),
        PanesCommand::Clear(args) => (args.json, panes_clear(args, wake_dir, env)),
    };
    let printed = done.map(|(value, text)| {
        // A closed stdout must not turn a completed write into a failure.
        let _ = writeln!(out, "{}", if json { format!("{value:#}") } else { text });
    });
    finish(printed, err)
}

/// Prints nothing on success: hook stdout can end up in the agent's context.
pub fn execute_wake_state(
    args: &WakeStateArgs,
    wake_dir: &Path,
    env: &Env,
    err: &mut dyn Write,
) -> ExitCode {
    let result = session_id(&args.session, env).and_then(|session_id| {
        let marked = match args.state {
            WakeState::Busy => set_busy(wake_dir, &session_id),
            WakeState::Idle => clear_busy(wake_dir, &session_id),
        };
        marked.map_err(marker_failure)
    });
    finish(result, err)
}

/// The exit code (1, or 2 for a usage error) and what to say.
struct Failed(u8, String);

fn finish(result: Result<(), Failed>, err: &mut dyn Write) -> ExitCode {
    let Err(Failed(code, message)) = result else {
        return ExitCode::SUCCESS;
    };
    let _ = writeln!(err, "wakebridge: {message}");
    ExitCode::from(code)
}

fn session_id(args: &SessionArgs, env: &Env) -> Result<String, Failed> {
    resolve_session_id(args.session_id.as_deref(), env).ok_or_else(|| {
        let [bus, claude] = SESSION_ID_ENVS;
        let message = format!("no session id: pass --session or set {bus} or {claude}");
        Failed(2, message)
    })
}

fn marker_failure(error: MarkerError) -> Failed {
    failed(matches!(error, MarkerError::UnsafeSessionId(_)), error)
}

fn write_failure(error: PanesWriteError) -> Failed {
    failed(matches!(error, PanesWriteError::InvalidTarget(_)), error)
}

fn failed(usage: bool, error: impl ToString) -> Failed {
    Failed(1 + u8::from(usage), error.to_string())
}

/// `--mux/--pane/--mux-session`, validated exactly like a file entry.
pub fn explicit_target(args: &PanesSetArgs) -> Option<Result<PaneTarget, InvalidTarget>> {
    let mux: &str = args.mux?.into();
    let mut value = json!({ "mux": mux, "pane": args.pane });
    if let Some(session) = &args.mux_session {
        value["session"] = json!(session);
    }
    Some(parse_target(&value))
}

fn panes_set(args: &PanesSetArgs, wake_dir: &Path, env: &Env) -> Result<(Value, String), Failed> {
    let session_id = session_id(&args.session, env)?;
    let invalid = |invalid| Failed(2, format!("Invalid target: {invalid}"));
    let explicit = explicit_target(args).transpose().map_err(invalid)?;
    // A lifecycle boundary proves no turn is in flight: the marker goes first.
    if !args.keep_wake_state {
        clear_busy_if_any(wake_dir, &session_id).map_err(marker_failure)?;
    }
    let Some(target) = explicit.or_else(|| detect_target(env)) else {
        let text = format!("Skipped: {SKIPPED_NO_MUX} (not inside tmux or zellij); nothing mapped");
        return Ok((json!({ "skipped": SKIPPED_NO_MUX }), text));
    };
    let outcome = set_entry(wake_dir, &session_id, &target).map_err(write_failure)?;
    Ok((outcome.to_json(), set_text(&outcome)))
}

fn panes_clear(
    args: &PanesClearArgs,
    wake_dir: &Path,
    env: &Env,
) -> Result<(Value, String), Failed> {
    let session_id = session_id(&args.session, env)?;
    clear_busy_if_any(wake_dir, &session_id).map_err(marker_failure)?;
    let also_pane = detect_target(env).filter(|_| !args.keep_pane_entries);
    let outcome = clear_entry(wake_dir, &session_id, also_pane.as_ref()).map_err(write_failure)?;
    let text = match outcome.removed.is_empty() {
        true => format!("No pane mapping to remove for {}", outcome.session_id),
        false => format!("Unmapped {}", outcome.removed.join(", ")),
    };
    Ok((outcome.to_json(), text))
}

pub fn set_text(outcome: &SetOutcome) -> String {
    let mapped = format!("Mapped {} -> {}", outcome.session_id, outcome.entry);
    let evicted = outcome.evicted.join(", ");
    match outcome.evicted.is_empty() {
        true => mapped,
        false => format!("{mapped}\nEvicted stale mapping(s) on the same pane: {evicted}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct TestCli {
        #[command(subcommand)]
        panes: PanesCommand,
    }

    #[test]
    fn session_id_falls_through_empty_values() {
        let env = Env::from_pairs([
            ("AGENT_EVENT_BUS_SESSION_ID", ""),
            ("CLAUDE_CODE_SESSION_ID", "cc-session"),
        ]);
        assert_eq!(
            resolve_session_id(Some(""), &env),
            Some("cc-session".into())
        );
        assert_eq!(resolve_session_id(Some("flag"), &env), Some("flag".into()));
        assert_eq!(resolve_session_id(None, &Env::empty()), None);
    }

    #[test]
    fn mux_without_pane_is_a_usage_error() {
        let error = TestCli::try_parse_from(["t", "set", "--mux", "tmux"]).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        let error = TestCli::try_parse_from(["t", "set", "--pane", "%1"]).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        let parsed = TestCli::try_parse_from([
            "t",
            "set",
            "--mux",
            "zellij",
            "--pane",
            "0",
            "--mux-session",
            "s",
            "--keep-wake-state",
            "--json",
        ]);
        assert!(parsed.is_ok());
    }

    #[test]
    fn explicit_zellij_without_session_is_invalid() {
        let args = PanesSetArgs {
            mux: Some(MuxKind::Zellij),
            pane: Some("0".into()),
            ..Default::default()
        };
        let invalid = explicit_target(&args).unwrap().unwrap_err();
        assert!(
            matches!(invalid, InvalidTarget::MissingZellijSession(_)),
            "{invalid}"
        );
        assert!(invalid.to_string().contains("session name"), "{invalid}");
    }

    #[test]
    fn text_output_names_the_pane() {
        let outcome = SetOutcome {
            session_id: "sid-1".into(),
            entry: PaneTarget::Tmux {
                pane: "%3".into(),
                session: None,
            },
            evicted: vec!["old".into()],
        };
        let text = set_text(&outcome);
        assert!(text.starts_with("Mapped sid-1 -> tmux pane %3\n"), "{text}");
        assert!(text.contains("old"));
    }
}
