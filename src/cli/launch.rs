//! `wakebridge launch`: flags and their configuration fallbacks turned into [`LaunchOptions`],
//! `crate::launch` run, the pane id (or JSON) printed. Exit codes: 0 ready; 1 the agent failed
//! to start, exited or timed out; 2 bad arguments or a refused pre-trust; 3 a human must answer
//! a screen (API key, login) in the pane left running.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use crate::claude::trust::PreTrustError;
use crate::config::Config;
use crate::env::Env;
use crate::launch::{
    LaunchError, LaunchOptions, LaunchSettingsError, Launched, Mapping, Placement, launch,
};
use crate::mux::{KeystrokeText, MuxConfig};

#[derive(Debug, Clone, Default, clap::Args)]
pub struct LaunchArgs {
    /// Working directory of the agent [default: the current directory]
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Name of the new tmux session (or of the new window inside tmux)
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// First prompt, typed once the agent is ready (printable, one line)
    #[arg(long, value_name = "TEXT")]
    pub prompt: Option<String>,
    /// Print the result as one JSON object
    #[arg(long)]
    pub json: bool,
    /// Mark the folder trusted in Claude Code's ~/.claude.json (backed up first) instead of
    /// answering the trust dialog
    #[arg(long)]
    pub pre_trust: bool,
    /// Seconds the agent gets to reach its idle prompt [default: launch.timeout, 90s]
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// Wake dir for the panes.json mapping [default: the configuration's, as `serve` uses it]
    #[arg(long, value_name = "DIR")]
    pub wake_dir: Option<PathBuf>,
    /// The agent's session id, if known (otherwise read from Claude Code's session registry)
    #[arg(long = "session", alias = "session-id", value_name = "ID")]
    pub session_id: Option<String>,
    /// tmux server socket (-S) [default: mux.tmux_socket]
    #[arg(long, value_name = "PATH")]
    pub tmux_socket: Option<PathBuf>,
    /// tmux binary [default: mux.tmux_bin]
    #[arg(long, value_name = "PATH")]
    pub tmux_bin: Option<PathBuf>,
    /// The agent and its arguments [default: launch.command, claude]
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchCliError {
    #[error("--prompt: {0}")]
    Prompt(#[from] crate::mux::TextError),
    #[error("--timeout must be a positive number of seconds, got {0}")]
    Timeout(f64),
    /// `[launch]`, used where no flag or `--` overrides it, in `serve`'s words.
    #[error(transparent)]
    Settings(#[from] LaunchSettingsError),
    #[error("--cwd: cannot determine the current directory: {0}")]
    NoCwd(std::io::Error),
    #[error("--pre-trust: {0}")]
    PreTrust(#[from] PreTrustError),
    #[error("--session must be non-empty and printable")]
    SessionId,
}

pub fn run(args: LaunchArgs, config: &Config) -> ExitCode {
    let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
    match super::block_on(run_with(args, config, &Env::process(), &mut out, &mut err)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            crate::errln!("wakebridge launch: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

/// [`run`] with the environment and output streams given.
pub async fn run_with(
    args: LaunchArgs,
    config: &Config,
    env: &Env,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    let json = args.json;
    let (code, said) = match options_from(args, config, env) {
        Err(e) => (2, vec![e.to_string()]),
        Ok(opts) => match launch(&opts).await {
            Ok(launched) => (0, report(&launched, json, out)),
            Err(e @ LaunchError::Prompt { .. }) => (
                e.exit_code(),
                vec![
                    e.to_string(),
                    "the agent is running; type the prompt yourself".into(),
                ],
            ),
            Err(e) => (e.exit_code(), vec![e.to_string()]),
        },
    };
    for line in said {
        let _ = writeln!(err, "wakebridge launch: {line}");
    }
    code
}

/// Prints the pane (or the JSON), and returns what else there is to say.
fn report(launched: &Launched, json: bool, out: &mut dyn Write) -> Vec<String> {
    let _ = match json {
        true => writeln!(out, "{}", launched.to_json()),
        false => writeln!(out, "{}", launched.pane),
    };
    let mut said = Vec::new();
    if let Some(done) = &launched.pre_trusted {
        let backup = done.backup.as_ref();
        let backup = backup.map_or(String::new(), |b| format!(" (backup: {})", b.display()));
        let what = match done.already_trusted {
            true => "already trusted in",
            false => "marked trusted in",
        };
        let (project, config) = (&done.project, done.config.display());
        said.push(format!("{project} {what} {config}{backup}"));
    }
    if !launched.screens_passed.is_empty() {
        let names: Vec<&str> = launched.screens_passed.iter().map(|&s| s.into()).collect();
        said.push(format!("answered {}", names.join(", ")));
    }
    let session = launched.session_id.as_deref().unwrap_or("?");
    said.push(match &launched.mapping {
        Mapping::Written => format!("mapped session {session} to {}", launched.pane),
        Mapping::NoSessionId => "session id unknown, pane mapping skipped (the SessionStart hook \
                                 maps it when it runs)"
            .into(),
        Mapping::NoWakeDir => "no wake dir, pane mapping skipped".into(),
        Mapping::Failed(why) => format!("pane mapping failed: {why}"),
    });
    said
}

pub fn options_from(
    args: LaunchArgs,
    config: &Config,
    env: &Env,
) -> Result<LaunchOptions, LaunchCliError> {
    let prompt = args.prompt.as_deref().map(KeystrokeText::new).transpose()?;
    let timeout = match args.timeout {
        None => crate::launch::timeout(config.settings.launch.timeout)?,
        Some(secs) if secs > 0.0 => {
            Duration::try_from_secs_f64(secs).map_err(|_| LaunchCliError::Timeout(secs))?
        }
        Some(secs) => return Err(LaunchCliError::Timeout(secs)),
    };
    if let Some(id) = &args.session_id
        && !crate::wakedir::printable::is_valid_string(id)
    {
        return Err(LaunchCliError::SessionId);
    }
    let cwd = match args.cwd {
        Some(cwd) => cwd,
        None => std::env::current_dir().map_err(LaunchCliError::NoCwd)?,
    };
    let command = match args.command.is_empty() {
        true => crate::launch::command(&config.settings.launch.command)?,
        false => args.command,
    };
    let claude_home = config.paths.claude.clone();
    let pre_trust = match (args.pre_trust, claude_home.clone()) {
        (true, home) => Some(home.map_err(PreTrustError::from)?.state_file_in_use()),
        (false, _) => None,
    };
    let mut mux = MuxConfig::from_settings(&config.settings.mux);
    if let Some(socket) = args.tmux_socket {
        mux.tmux_socket = (!socket.as_os_str().is_empty()).then_some(socket);
    }
    if let Some(bin) = args.tmux_bin.filter(|b| !b.as_os_str().is_empty()) {
        mux.tmux_bin = bin;
    }
    // Inside tmux (`$TMUX` set) a new window of the caller's session, unless another server
    // was asked for; otherwise a new detached session.
    let tmux = env.nonempty("TMUX");
    let own_socket = tmux.as_deref().map(|t| t.split(',').next().unwrap_or(""));
    let placement = match (own_socket, mux.tmux_socket.as_deref()) {
        (None, _) => Placement::NewSession,
        (Some(own), Some(asked)) if asked != Path::new(own) => Placement::NewSession,
        (Some(_), _) => Placement::NewWindow { target: None },
    };
    Ok(LaunchOptions {
        cwd,
        name: args.name,
        command,
        prompt,
        pre_trust,
        timeout,
        wake_dir: Some(config.paths.wake_dir.clone()),
        session_id: args.session_id,
        claude_home: claude_home.ok(),
        placement,
        mux,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn env_of(pairs: &[(&str, &str)]) -> Env {
        Env::from_pairs(pairs.iter().copied())
    }

    /// The configuration `serve` would resolve in an environment of these pairs.
    fn config(pairs: &[(&str, &str)]) -> Config {
        let env = env_of(pairs).with("XDG_CONFIG_HOME", "/nonexistent-wakebridge-test");
        crate::config::resolve(&crate::config::Flags::default(), &env).expect("config")
    }

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: LaunchArgs,
    }

    fn parse(argv: &[&str]) -> LaunchArgs {
        Wrapper::try_parse_from(std::iter::once("launch").chain(argv.iter().copied()))
            .unwrap()
            .args
    }

    #[test]
    fn defaults_are_claude_in_a_new_session() {
        let pairs = &[("HOME", "/home/u")];
        let env = env_of(pairs);
        let cfg = config(pairs);
        let opts = options_from(parse(&["--cwd", "/tmp"]), &cfg, &env).unwrap();
        assert_eq!(opts.command, ["claude"]);
        assert_eq!(opts.timeout, Duration::from_secs(90));
        assert_eq!(opts.placement, Placement::NewSession);
        assert_eq!(opts.pre_trust, None);
        assert_eq!(
            opts.claude_home.map(|h| h.dir),
            Some(PathBuf::from("/home/u/.claude"))
        );
        assert_eq!(
            opts.wake_dir,
            Some(PathBuf::from(
                "/home/u/.claude/contrib/agent-event-bus/wake"
            ))
        );
    }

    #[test]
    fn command_after_double_dash_and_pre_trust_path() {
        let pairs = &[
            ("HOME", "/home/u"),
            (crate::claude::home::CONFIG_DIR_ENV, "/cfg"),
        ];
        let env = env_of(pairs);
        let cfg = config(pairs);
        let args = parse(&[
            "--pre-trust",
            "--timeout",
            "2.5",
            "--",
            "claude",
            "--model",
            "x",
        ]);
        let opts = options_from(args, &cfg, &env).unwrap();
        assert_eq!(opts.command, ["claude", "--model", "x"]);
        assert_eq!(opts.pre_trust, Some(PathBuf::from("/cfg/.claude.json")));
        assert_eq!(opts.claude_home.map(|h| h.dir), Some(PathBuf::from("/cfg")));
        assert_eq!(opts.timeout, Duration::from_millis(2500));
    }

    #[test]
    fn inside_tmux_a_window_unless_another_server() {
        let pairs = &[("HOME", "/h"), ("TMUX", "/tmp/tmux-0/default,17361,0")];
        let env = env_of(pairs);
        let cfg = config(pairs);
        let opts = options_from(parse(&[]), &cfg, &env).unwrap();
        assert_eq!(opts.placement, Placement::NewWindow { target: None });
        let opts = options_from(parse(&["--tmux-socket", "/tmp/other"]), &cfg, &env).unwrap();
        assert_eq!(opts.placement, Placement::NewSession);
        let opts =
            options_from(parse(&["--tmux-socket", "/tmp/tmux-0/default"]), &cfg, &env).unwrap();
        assert_eq!(opts.placement, Placement::NewWindow { target: None });
    }

    #[test]
    fn bad_prompt_timeout_and_session_id_are_usage_errors() {
        let pairs = &[("HOME", "/h")];
        let env = env_of(pairs);
        let cfg = config(pairs);
        for argv in [
            &["--prompt", "1 start with a digit"][..],
            &["--prompt", "two\nlines"],
            &["--timeout", "0"],
            &["--timeout=-3"],
            &["--session", ""],
        ] {
            assert!(options_from(parse(argv), &cfg, &env).is_err(), "{argv:?}");
        }
    }

    #[test]
    fn the_launch_section_sets_the_command_and_timeout_and_refuses_none() {
        let pairs = &[
            ("HOME", "/h"),
            ("WAKEBRIDGE_LAUNCH__COMMAND", "claude,--model,opus"),
            ("WAKEBRIDGE_LAUNCH__TIMEOUT", "2m"),
        ];
        let env = env_of(pairs);
        let opts = options_from(parse(&[]), &config(pairs), &env).unwrap();
        assert_eq!(opts.command, ["claude", "--model", "opus"]);
        assert_eq!(opts.timeout, Duration::from_secs(120));
        // Flags win over the section.
        let opts = options_from(
            parse(&["--timeout", "5", "--", "agent"]),
            &config(pairs),
            &env,
        )
        .unwrap();
        assert_eq!(
            (opts.command, opts.timeout),
            (vec!["agent".to_owned()], Duration::from_secs(5))
        );
        for (pair, says) in [
            (
                ("WAKEBRIDGE_LAUNCH__COMMAND", ""),
                "launch.command is empty",
            ),
            (("WAKEBRIDGE_LAUNCH__TIMEOUT", "0"), "launch.timeout is 0"),
        ] {
            let pairs = &[("HOME", "/h"), pair];
            let err = options_from(parse(&[]), &config(pairs), &env_of(pairs)).unwrap_err();
            assert!(err.to_string().starts_with(says), "{err}");
        }
    }

    #[tokio::test]
    async fn usage_errors_exit_2_before_anything_starts() {
        let pairs = &[("HOME", "/h")];
        let env = env_of(pairs);
        let cfg = config(pairs);
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = run_with(parse(&["--timeout", "nan"]), &cfg, &env, &mut out, &mut err).await;
        assert_eq!(code, 2);
        assert!(out.is_empty());
        assert!(String::from_utf8_lossy(&err).contains("--timeout"));
    }
}
