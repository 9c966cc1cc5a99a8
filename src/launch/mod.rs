//! The launcher: start an agent in a new tmux session, window or respawned pane, answer its
//! first-run screens ([`driver`]), learn its session id, map its pane and type a first prompt.
//! A failed start removes what it created; a screen only a human may answer (an API key, a
//! login) stops the launch and leaves the pane up. `[launch]`, validated ([`validate`]), is
//! what `wakebridge launch` starts when no command follows `--`, and what a restart starts.

pub(crate) mod driver;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::agent::{Agent, Side};
use crate::claude::home::ClaudeHome;
use crate::claude::registry;
use crate::claude::trust::{PreTrustError, PreTrusted};
use crate::config::LaunchSettings;
use crate::deadline::Deadline;
use crate::mux::tmux::create::{self, NewPane, Probe};
use crate::mux::{
    INJECT_BUDGET, InjectError, Injector, KeystrokeText, MuxConfig, MuxError, Tmux, ps,
};
use crate::reading::screen::Screen;
use crate::wakedir::target::PaneTarget;
use crate::wakedir::writer::{PanesWriteError, set_entry};
pub use driver::Passed;
use driver::{Driver, Halt, Step};

/// Pause between captures.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);
/// Size of a new detached session: wide enough that no dialog line wraps.
const SESSION_SIZE: (u16, u16) = (120, 40);
/// Budget of one tmux call: it only bounds a wedged server.
const TMUX_CALL_BUDGET: Duration = Duration::from_secs(5);
/// Scrollback read from a dead pane: "Pane is dead" may have scrolled the last words away.
const DEAD_PANE_HISTORY: u32 = 200;
/// How long to wait for a dead pane's exit status, which tmux learns a moment after the death.
const EXIT_STATUS_WAIT: Duration = Duration::from_secs(1);
const EXIT_STATUS_POLL: Duration = Duration::from_millis(50);
/// How long to look for Claude Code's `sessions/<pid>.json` once the prompt is up.
pub const REGISTRY_WAIT: Duration = Duration::from_secs(3);
/// Deepest process tree walked from the pane's first process to find the agent.
const MAX_TREE_DEPTH: usize = 6;
/// Session names tried while the default name is taken: `name`, `name-2`, ...
const MAX_NAME_ATTEMPTS: u32 = 20;
/// Longest generated session name; tmux accepts more, but people type these.
const MAX_DEFAULT_NAME_CHARS: usize = 40;
/// How Anthropic API keys start; words containing it are masked in quoted screens.
const KEY_PREFIX: &str = "sk-ant-";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchSettingsError {
    #[error(
        "launch.timeout is 0; give the agent time to reach its prompt, e.g. \"90s\" \
         (WAKEBRIDGE_LAUNCH__TIMEOUT)"
    )]
    ZeroTimeout,
    #[error(
        "launch.command is empty; give the agent to start, e.g. [\"claude\"] \
         (WAKEBRIDGE_LAUNCH__COMMAND; `wakebridge launch` also takes it after --)"
    )]
    NoCommand,
}

/// `[launch]` validated: what `wakebridge launch` starts when no command follows `--`, and what
/// a restart starts.
pub fn validate(settings: &LaunchSettings) -> Result<LaunchSettings, LaunchSettingsError> {
    Ok(LaunchSettings {
        command: command(&settings.command)?,
        timeout: timeout(settings.timeout)?,
    })
}

/// `launch.command`, refused when it names no program (an empty list, or a blank first element
/// tmux would fail to run).
pub fn command(command: &[String]) -> Result<Vec<String>, LaunchSettingsError> {
    let names_program = command.first().is_some_and(|p| !p.trim().is_empty());
    (names_program.then(|| command.to_vec())).ok_or(LaunchSettingsError::NoCommand)
}

pub fn timeout(timeout: Duration) -> Result<Duration, LaunchSettingsError> {
    (!timeout.is_zero())
        .then_some(timeout)
        .ok_or(LaunchSettingsError::ZeroTimeout)
}

/// Where the new pane goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// A new detached session on the server (`--name` names it).
    NewSession,
    /// A new background window in the caller's session (`None`) or the named one.
    NewWindow { target: Option<String> },
    /// In an existing pane (`%N`), replacing what runs there: a restart. A failed start leaves
    /// the pane for a human; it is not the launcher's to remove.
    Respawn { pane: String },
}

#[derive(Debug, Clone)]
pub struct LaunchOptions {
    pub cwd: PathBuf,
    /// Session name (new session) or window name (new window).
    pub name: Option<String>,
    pub command: Vec<String>,
    pub prompt: Option<KeystrokeText>,
    /// Mark `cwd` trusted in this Claude Code config file before starting.
    pub pre_trust: Option<PathBuf>,
    pub timeout: Duration,
    /// Wake dir whose `panes.json` gets the mapping.
    pub wake_dir: Option<PathBuf>,
    pub session_id: Option<String>,
    /// To learn the session id from `sessions/<pid>.json`.
    pub claude_home: Option<ClaudeHome>,
    pub placement: Placement,
    pub mux: MuxConfig,
}

/// Whether the pane mapping was written.
#[derive(Debug)]
pub enum Mapping {
    Written,
    /// No session id was given or found; the SessionStart hook maps the session when it runs.
    NoSessionId,
    NoWakeDir,
    Failed(PanesWriteError),
}

/// A launched, ready agent.
#[derive(Debug)]
pub struct Launched {
    pub pane: String,
    pub tmux_session: String,
    pub window: String,
    pub cwd: PathBuf,
    pub command: Vec<String>,
    pub session_id: Option<String>,
    pub mapping: Mapping,
    pub screens_passed: Vec<Passed>,
    pub pre_trusted: Option<PreTrusted>,
    pub prompt_typed: bool,
}

impl Launched {
    pub fn to_json(&self) -> Value {
        let mut out = json!({
            "pane": self.pane,
            "tmux_session": self.tmux_session,
            "window": self.window,
            "cwd": self.cwd.to_string_lossy(),
            "command": self.command,
            "screens_passed": self.screens_passed.iter().map(|&s| <&str>::from(s)).collect::<Vec<_>>(),
            "mapped": matches!(self.mapping, Mapping::Written),
            "pre_trusted": self.pre_trusted.is_some(),
            "prompt_typed": self.prompt_typed,
        });
        if let Some(id) = &self.session_id {
            out["session_id"] = json!(id);
        }
        out
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("invalid command: {0}")]
    BadCommand(String),
    #[error("working directory {path}: {source}; pass an existing directory with --cwd")]
    BadCwd {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("could not pre-trust the folder: {0}")]
    PreTrust(#[from] PreTrustError),
    #[error("could not create the tmux {what}: {source}")]
    Create {
        what: &'static str,
        source: MuxError,
    },
    #[error("tmux failed while driving pane {pane}: {source}")]
    Tmux { pane: String, source: MuxError },
    #[error(
        "a human is needed: {what}. Nothing was answered; the agent is left running in pane \
         {pane} (attach: {attach}). Screen:\n{screen}"
    )]
    HumanNeeded {
        what: &'static str,
        pane: String,
        attach: String,
        screen: String,
    },
    #[error(
        "the agent exited before it was ready ({why}); the window the launch created was removed \
         (a pane it restarted is left). Last screen:\n{screen}"
    )]
    Exited { why: String, screen: String },
    #[error(
        "the agent was not ready within {}s; the window the launch created was removed (a pane it \
         restarted is left). Last screen:\n{screen}",
        after.as_secs()
    )]
    NotReady { after: Duration, screen: String },
    #[error(
        "the trust dialog's selection did not move to \"Yes\" after {} presses, so nothing was \
         confirmed; the window the launch created was removed (a pane it restarted is left). Last \
         screen:\n{screen}",
        driver::MAX_SELECTION_MOVES
    )]
    CannotSelectYes { screen: String },
    #[error("the agent in pane {pane} is ready but the first prompt could not be typed: {source}")]
    Prompt { pane: String, source: InjectError },
}

impl LaunchError {
    /// Exit status for the CLI: 3 when a human must act, 2 for bad input, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            LaunchError::HumanNeeded { .. } => 3,
            LaunchError::BadCommand(_) | LaunchError::BadCwd { .. } | LaunchError::PreTrust(_) => 2,
            _ => 1,
        }
    }
}

/// Start the agent, pass its first-run screens, map and prompt it.
pub async fn launch(opts: &LaunchOptions) -> Result<Launched, LaunchError> {
    let argv = tmux_command_args(&opts.command)?;
    let agent = Agent::of_command(&opts.command).side();
    let cwd = std::fs::canonicalize(&opts.cwd).map_err(|source| LaunchError::BadCwd {
        path: opts.cwd.clone(),
        source,
    })?;
    if !cwd.is_dir() {
        return Err(LaunchError::BadCwd {
            path: cwd,
            source: std::io::Error::other("not a directory"),
        });
    }
    let pre_trusted = (opts.pre_trust.as_ref())
        .map(|config| crate::claude::trust::pre_trust(config, &cwd))
        .transpose()?;
    let tmux = Tmux::new(&opts.mux);
    let created = create(&tmux, opts, &cwd, &argv).await?;
    let driven = drive(&tmux, &created, opts.timeout, agent).await;
    match driven {
        Ok(_) | Err(LaunchError::HumanNeeded { .. }) => {
            restore_exit_behaviour(&tmux, &created, &opts.placement).await;
        }
        Err(_) => remove(&tmux, &created, &opts.placement).await,
    }
    let passed = driven?;
    let session_id = match (&opts.session_id, &opts.claude_home) {
        (Some(id), _) => Some(id.clone()),
        (None, Some(home)) if agent.session_registry() => learn_session_id(home, created.pid).await,
        (None, _) => None,
    };
    // As the SessionStart hook maps it: entries for one pane must be equal for a later mapping
    // to replace them.
    let target = PaneTarget::Tmux {
        pane: created.pane.clone(),
        session: None,
    };
    let mapping = match (&opts.wake_dir, &session_id) {
        (None, _) => Mapping::NoWakeDir,
        (Some(_), None) => Mapping::NoSessionId,
        (Some(dir), Some(id)) => match set_entry(dir, id, &target) {
            Ok(_) => Mapping::Written,
            Err(err) => Mapping::Failed(err),
        },
    };
    if let Some(prompt) = &opts.prompt {
        Injector::new(&opts.mux)
            .inject(
                &agent.prompt(),
                None,
                &target,
                prompt,
                Deadline::after(INJECT_BUDGET),
            )
            .await
            .map_err(|source| LaunchError::Prompt {
                pane: created.pane.clone(),
                source,
            })?;
    }
    Ok(Launched {
        pane: created.pane,
        tmux_session: created.session_name,
        window: created.window_id,
        cwd,
        command: opts.command.clone(),
        session_id,
        mapping,
        screens_passed: passed,
        pre_trusted,
        prompt_typed: opts.prompt.is_some(),
    })
}

/// Poll the pane until the driver says ready, or the launch fails.
async fn drive(
    tmux: &Tmux,
    created: &NewPane,
    timeout: Duration,
    agent: &dyn Side,
) -> Result<Vec<Passed>, LaunchError> {
    let started = Instant::now();
    let deadline = Deadline::after(timeout);
    let mut driver = Driver::reading(agent.first_run_reader());
    let mut last_screen = String::new();
    let tmux_err = |source| LaunchError::Tmux {
        pane: created.pane.clone(),
        source,
    };
    loop {
        let probe = match tmux.probe(&created.pane, tmux_call()).await {
            Ok(probe) => probe,
            Err(err) if create::is_missing_target(&err) => {
                return Err(LaunchError::Exited {
                    why: "its pane disappeared".into(),
                    screen: tidy_screen(&last_screen),
                });
            }
            Err(err) => return Err(tmux_err(err)),
        };
        if probe.dead {
            let status = match probe.status {
                Some(status) => status,
                None => wait_for_exit_status(tmux, &created.pane).await,
            };
            let screen = tmux
                .capture_history(&created.pane, DEAD_PANE_HISTORY, tmux_call())
                .await
                .unwrap_or(probe.screen);
            return Err(LaunchError::Exited {
                why: status,
                screen: tidy_screen(&screen),
            });
        }
        last_screen = probe.screen;
        match driver.step(started.elapsed(), &last_screen) {
            Step::Wait => {}
            Step::Press(key) => tmux
                .press(&created.pane, key, tmux_call())
                .await
                .map_err(tmux_err)?,
            Step::Ready => return Ok(driver.passed().to_vec()),
            Step::Halt(halt) => return Err(halted(halt, tmux, created, &last_screen)),
        }
        if deadline.expired() {
            return Err(LaunchError::NotReady {
                after: timeout,
                screen: tidy_screen(&last_screen),
            });
        }
        tokio::time::sleep(POLL_INTERVAL.min(deadline.remaining().max(Duration::from_millis(1))))
            .await;
    }
}

fn halted(halt: Halt, tmux: &Tmux, created: &NewPane, screen: &str) -> LaunchError {
    let screen = tidy_screen(screen);
    match halt {
        Halt::HumanNeeded(kind) => LaunchError::HumanNeeded {
            what: match kind {
                Screen::ApiKeyPrompt => {
                    "Claude Code asks whether to use the API key in its environment; approving a \
                     key is a human's decision (or pre-approve it in ~/.claude.json)"
                }
                Screen::HooksReview => {
                    "Codex asks a person to review its new or changed hooks before they run; \
                     answer in the pane (`wakebridge codex install --trust-hooks` approves \
                     wakebridge's own beforehand)"
                }
                _ => {
                    "Claude Code asks for a login; sign in in the pane, then launch again or carry on there"
                }
            },
            pane: created.pane.clone(),
            attach: tmux.attach_command(&created.session_name),
            screen,
        },
        Halt::Exited(kind) => LaunchError::Exited {
            why: match kind {
                Screen::Declined => "it says the folder is not trusted".into(),
                _ => "it could not connect to Anthropic services".into(),
            },
            screen,
        },
        Halt::CannotSelectYes => LaunchError::CannotSelectYes { screen },
    }
}

/// The visible text worth quoting: no "Pane is dead" line, blank lines squeezed, and words
/// holding an Anthropic key (the key screen shows its tail) masked so they stay out of logs.
fn tidy_screen(screen: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    for line in screen.lines() {
        let line = line.trim_end();
        if line.starts_with("Pane is dead")
            || line.is_empty() && out.last().is_none_or(String::is_empty)
        {
            continue;
        }
        let masked = line.split(' ').map(|w| {
            if w.contains(KEY_PREFIX) {
                "sk-ant-[masked]"
            } else {
                w
            }
        });
        out.push(masked.collect::<Vec<_>>().join(" "));
    }
    while out.last().is_some_and(String::is_empty) {
        out.pop();
    }
    if out.is_empty() {
        "(blank)".into()
    } else {
        out.join("\n")
    }
}

/// The argv tail for `new-session`/`new-window`/`respawn-pane`: `command` under `env
/// WAKEBRIDGE=keep`, so every agent started here is one wakebridge keeps working whatever
/// `[nudger] keep` says (tmux's own `-e` needs 3.2). tmux reads an argument ending in `;` as a
/// separator, so it is escaped.
fn tmux_command_args(command: &[String]) -> Result<Vec<String>, LaunchError> {
    let Some(first) = command.first() else {
        return Err(LaunchError::BadCommand("the command is empty".into()));
    };
    if first.is_empty() {
        return Err(LaunchError::BadCommand("the program name is empty".into()));
    }
    if let Some(bad) = command.iter().find(|arg| arg.contains('\0')) {
        return Err(LaunchError::BadCommand(format!(
            "argument {bad:?} contains a NUL byte"
        )));
    }
    if let Some(bad) = command.iter().find(|arg| arg.ends_with("\\;")) {
        return Err(LaunchError::BadCommand(format!(
            "argument {bad:?} ends in \\; which tmux cannot pass through; wrap the command in a script"
        )));
    }
    let kept = crate::env::KEEP;
    Ok(["env", kept].into_iter().map(str::to_owned))
        .map(|env| {
            env.chain(command.iter().map(|arg| match arg.strip_suffix(';') {
                Some(head) => format!("{head}\\;"),
                None => arg.clone(),
            }))
        })
        .map(Iterator::collect)
}

/// Default session name: `<program>-<folder>`, restricted to letters, digits, `-` and `_`.
fn default_session_name(command: &[String], cwd: &Path) -> String {
    let program = (command.first().and_then(|p| Path::new(p).file_name()))
        .map_or("agent".into(), |name| name.to_string_lossy());
    let raw = match cwd.file_name() {
        Some(folder) => format!("{program}-{}", folder.to_string_lossy()),
        None => program.into_owned(),
    };
    let tame = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    raw.chars()
        .map(|c| if tame(c) { c } else { '-' })
        .take(MAX_DEFAULT_NAME_CHARS)
        .collect()
}

fn tmux_call() -> Deadline {
    Deadline::after(TMUX_CALL_BUDGET)
}

/// Create the launch's pane: a respawn, a new window, or a new session.
async fn create(
    tmux: &Tmux,
    opts: &LaunchOptions,
    cwd: &Path,
    argv: &[String],
) -> Result<NewPane, LaunchError> {
    let failed = |what| move |source| LaunchError::Create { what, source };
    match &opts.placement {
        Placement::Respawn { pane } => {
            return (tmux.respawn(pane, cwd, argv, tmux_call()).await).map_err(failed("pane"));
        }
        Placement::NewWindow { target } => {
            let name = opts.name.as_deref();
            let created = tmux.new_window(target.as_deref(), name, cwd, argv, tmux_call());
            return created.await.map_err(failed("window"));
        }
        Placement::NewSession => {}
    }
    let base = (opts.name.clone()).unwrap_or_else(|| default_session_name(&opts.command, cwd));
    let attempts = opts.name.as_ref().map_or(MAX_NAME_ATTEMPTS, |_| 1);
    let taken = |e: &MuxError| e.stderr().is_some_and(|s| s.contains("duplicate session"));
    let mut n = 1;
    loop {
        let name = if n == 1 {
            base.clone()
        } else {
            format!("{base}-{n}")
        };
        let created = tmux.new_session(&name, cwd, SESSION_SIZE, argv, tmux_call());
        match created.await {
            Err(err) if n < attempts && taken(&err) => n += 1,
            created => return created.map_err(failed("session")),
        }
    }
}

/// The exit status of a dead pane, waiting up to [`EXIT_STATUS_WAIT`] for tmux to reap it.
async fn wait_for_exit_status(tmux: &Tmux, pane: &str) -> String {
    let deadline = Deadline::after(EXIT_STATUS_WAIT);
    loop {
        if let Ok(Probe {
            status: Some(status),
            ..
        }) = tmux.probe(pane, tmux_call()).await
        {
            return status;
        }
        if deadline.expired() {
            return "it exited".into();
        }
        tokio::time::sleep(EXIT_STATUS_POLL).await;
    }
}

/// Drop the launch's remain-on-exit, so the agent's window closes when it exits later. Best
/// effort: a lingering dead pane is only untidy.
async fn restore_exit_behaviour(tmux: &Tmux, created: &NewPane, placement: &Placement) {
    // A respawned pane's option was set on the pane alone, not on someone's window.
    let target = match placement {
        Placement::Respawn { pane } => pane,
        _ => &created.window_id,
    };
    if let Err(err) = tmux.keep_dead_pane(target, false, tmux_call()).await {
        tracing::debug!(pane = %created.pane, error = %err, "could not unset remain-on-exit");
    }
}

/// Remove what the launch created; best effort (it may already be gone).
async fn remove(tmux: &Tmux, created: &NewPane, placement: &Placement) {
    let removed = match placement {
        Placement::NewSession => tmux.kill(&created.session_id, false, tmux_call()).await,
        Placement::NewWindow { .. } => tmux.kill(&created.window_id, true, tmux_call()).await,
        Placement::Respawn { .. } => return,
    };
    if let Err(err) = removed {
        tracing::debug!(pane = %created.pane, error = %err, "could not remove the failed launch's window");
    }
}

/// The session id from the registry file of any process in the pane's tree.
async fn learn_session_id(claude_home: &ClaudeHome, pane_pid: Option<u32>) -> Option<String> {
    let root = pane_pid?;
    let registry = claude_home.sessions();
    let deadline = Deadline::after(REGISTRY_WAIT);
    loop {
        if let Ok(parents) = ps::parents(tmux_call()).await {
            let found = ps::tree(root, &parents, MAX_TREE_DEPTH)
                .into_iter()
                .find_map(|pid| registry::session_of_pid(&registry, pid));
            if found.is_some() {
                return found;
            }
        }
        if deadline.expired() {
            return None;
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_run_kept_as_given_and_trailing_semicolons_escaped() {
        assert_eq!(
            tmux_command_args(&["claude".into()]).unwrap(),
            ["env", "WAKEBRIDGE=keep", "claude"]
        );
        assert_eq!(
            tmux_command_args(&["/opt/my agent/it's".into()]).unwrap(),
            ["env", "WAKEBRIDGE=keep", "/opt/my agent/it's"]
        );
        assert_eq!(
            tmux_command_args(&["sh".into(), "-c".into(), "a; b;".into()]).unwrap(),
            ["env", "WAKEBRIDGE=keep", "sh", "-c", r"a; b\;"]
        );
        assert!(tmux_command_args(&[]).is_err());
        assert!(tmux_command_args(&["x".into(), r"a\;".into()]).is_err());
    }

    #[test]
    fn default_names_are_tame() {
        assert_eq!(
            default_session_name(&["/usr/bin/claude".into()], Path::new("/home/u/my.proj")),
            "claude-my-proj"
        );
        let long = default_session_name(
            &["claude".into()],
            Path::new(&format!("/{}", "x".repeat(99))),
        );
        assert_eq!(long.chars().count(), MAX_DEFAULT_NAME_CHARS);
    }

    #[test]
    fn tidy_screen_drops_the_dead_line_and_squeezes_blanks() {
        let raw = "\n\nhello   \n\n\n\nworld\n\n\nPane is dead (status 1, now)\n\n";
        assert_eq!(tidy_screen(raw), "hello\n\nworld");
        assert_eq!(tidy_screen("\n \n"), "(blank)");
        assert_eq!(
            tidy_screen(" ANTHROPIC_API_KEY: sk-ant-...abcdefghij0123456789"),
            " ANTHROPIC_API_KEY: sk-ant-[masked]"
        );
    }

    #[test]
    fn exit_codes_separate_humans_from_failures() {
        let human = LaunchError::HumanNeeded {
            what: "x",
            pane: "%1".into(),
            attach: "tmux attach".into(),
            screen: String::new(),
        };
        assert_eq!(human.exit_code(), 3);
        assert!(human.to_string().contains("a human is needed"));
        assert_eq!(LaunchError::BadCommand("x".into()).exit_code(), 2);
        let slow = LaunchError::NotReady {
            after: Duration::from_secs(9),
            screen: "s".into(),
        };
        assert_eq!(slow.exit_code(), 1);
    }
}
