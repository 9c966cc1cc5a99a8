//! The launcher: start an agent (Claude Code by default) in a new tmux session (or a new window
//! of the caller's session), get it past its first-run screens without a human, and hand back
//! the pane. It owns the tmux side of a launch (creating the pane with remain-on-exit so a
//! failed start can still be read, polling `capture-pane`, pressing Enter/Down/Up, removing what
//! it created when the start failed), learning the new session's id from Claude Code's process
//! registry, writing the `panes.json` mapping, and typing a first prompt once the agent is idle.
//! Which key to press on which screen is [`screens`]'s pure decision; editing Claude Code's
//! config to pre-trust a folder is [`pretrust`]'s; argument parsing and output are [`cli`]'s.
//!
//! It never presses Escape, a digit or text on a dialog, never approves an API key or a login
//! (those stop the launch and leave the pane for a human), and types the first prompt only as a
//! validated [`KeystrokeText`] through the shared [`Injector`].

pub mod screens;

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::claude::trust::{PreTrustError, PreTrusted};
use crate::deadline::Deadline;
use crate::mux::process::{self, Invocation};
use crate::mux::{INJECT_BUDGET, InjectError, Injector, KeystrokeText, MuxConfig, MuxError};
use crate::wakedir::printable::is_valid_string;
use crate::wakedir::target::PaneTarget;
use crate::wakedir::writer::set_entry;
use screens::{Driver, Halt, Key, Passed, Screen, Step};

/// How long the agent gets to reach its idle prompt. Claude Code offline shows a blank pane for
/// 15-20 s after the trust dialog (remote settings time out) and about 20 s on a pre-trusted
/// start; a slow machine or network doubles that, and 90 s still fails a hung start in time.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(90);
/// Pause between captures: fast enough that a dialog is answered within a second of its settle
/// time, slow enough that the forks (one tmux call per poll) cost nothing.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);
/// Size of a new detached session. Claude Code lays its screens out for the width; this is the
/// size the reference screens were recorded at, wide enough that no dialog line wraps.
pub const SESSION_WIDTH: u16 = 120;
pub const SESSION_HEIGHT: u16 = 40;
/// Budget of one tmux call (create, capture, key). tmux answers in milliseconds; this only
/// bounds a wedged server.
const TMUX_CALL_BUDGET: Duration = Duration::from_secs(5);
/// Scrollback lines read from a dead pane: a process that exits prints its last words and tmux
/// then scrolls them off the visible area with its "Pane is dead" line.
const DEAD_PANE_HISTORY: u32 = 200;
/// How long to wait for tmux to report a dead pane's exit status: tmux marks the pane dead
/// when its terminal closes and learns the status when it reaps the process, a moment later.
const EXIT_STATUS_WAIT: Duration = Duration::from_secs(1);
/// Re-probe interval while waiting for that status: short, the wait is brief.
const EXIT_STATUS_POLL: Duration = Duration::from_millis(50);
/// How long to look for Claude Code's `sessions/<pid>.json` once the prompt is up; the file is
/// written at start-up, so this only covers a slow first write.
pub const REGISTRY_WAIT: Duration = Duration::from_secs(3);
/// Deepest process tree walked from the pane's first process to find the agent (shell →
/// wrapper → env → claude is already deep).
const MAX_TREE_DEPTH: usize = 6;
/// Largest registry file read: the real one is a few hundred bytes.
const MAX_REGISTRY_BYTES: u64 = 64 * 1024;
/// Longest session id accepted from the registry (Claude Code's are 36-character UUIDs).
const MAX_SESSION_ID_CHARS: usize = 200;
/// Session names tried when the default name is taken: `name`, `name-2`, ... `name-N`.
const MAX_NAME_ATTEMPTS: u32 = 20;
/// Longest generated session name; tmux accepts more, but people type these.
const MAX_DEFAULT_NAME_CHARS: usize = 40;
/// What `tmux new-session/new-window -P` prints about the new pane.
const CREATED_FORMAT: &str =
    "#{pane_id}\t#{session_name}\t#{session_id}\t#{window_id}\t#{pane_pid}";
/// How Anthropic API keys start; words containing it are masked in quoted screens.
const KEY_PREFIX: &str = "sk-ant-";
/// What each poll asks about the pane before capturing it.
const PROBE_FORMAT: &str = "#{pane_dead}\t#{pane_dead_status}";

/// Where the new pane goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// A new detached session on the server (`--name` names it).
    NewSession,
    /// A new background window in an existing session: the caller's own (`target: None`, when
    /// running inside tmux) or the named one. `--name` names the window.
    NewWindow { target: Option<String> },
}

/// Everything a launch needs; [`cli`] fills it from flags and the environment.
#[derive(Debug, Clone)]
pub struct LaunchOptions {
    /// Absolute working directory of the agent.
    pub cwd: PathBuf,
    /// Session name (new session) or window name (new window).
    pub name: Option<String>,
    /// The agent's argv; non-empty.
    pub command: Vec<String>,
    /// Typed once the agent is ready.
    pub prompt: Option<KeystrokeText>,
    /// Mark `cwd` trusted in this Claude Code config file before starting.
    pub pre_trust: Option<PathBuf>,
    /// How long the agent gets to become ready.
    pub timeout: Duration,
    /// Wake dir whose `panes.json` gets the mapping; `None` skips it.
    pub wake_dir: Option<PathBuf>,
    /// The agent's session id, when the caller knows it.
    pub session_id: Option<String>,
    /// Claude Code's config home (`~/.claude`), to learn the session id from
    /// `sessions/<pid>.json`; `None` skips that.
    pub claude_home: Option<PathBuf>,
    pub placement: Placement,
    /// tmux binary and socket (and the submit delay for the prompt).
    pub mux: MuxConfig,
}

/// Whether the pane mapping was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mapping {
    Written,
    /// No session id was given or found; the SessionStart hook maps the session when it runs.
    NoSessionId,
    /// No wake dir was configured.
    NoWakeDir,
    Failed(String),
}

/// A launched, ready agent.
#[derive(Debug, Clone)]
pub struct Launched {
    /// tmux pane id, `%N`.
    pub pane: String,
    pub tmux_session: String,
    /// tmux window id, `@N`.
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
    /// `{"pane","tmux_session","window","cwd","command","session_id"?,"screens_passed",
    /// "mapped","pre_trusted","prompt_typed"}`.
    pub fn to_json(&self) -> Value {
        let mut out = json!({
            "pane": self.pane,
            "tmux_session": self.tmux_session,
            "window": self.window,
            "cwd": self.cwd.to_string_lossy(),
            "command": self.command,
            "screens_passed": self.screens_passed.iter().map(|s| s.name()).collect::<Vec<_>>(),
            "mapped": self.mapping == Mapping::Written,
            "pre_trusted": self.pre_trusted.is_some(),
            "prompt_typed": self.prompt_typed,
        });
        if let (Some(id), Some(map)) = (&self.session_id, out.as_object_mut()) {
            map.insert("session_id".into(), Value::String(id.clone()));
        }
        out
    }
}

/// Why a launch failed.
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
        "the agent exited before it was ready ({why}); its window was removed. Last screen:\n{screen}"
    )]
    Exited { why: String, screen: String },
    #[error(
        "the agent was not ready within {}s; its window was removed. Last screen:\n{screen}",
        after.as_secs()
    )]
    NotReady { after: Duration, screen: String },
    #[error(
        "the trust dialog's selection did not move to \"Yes\" after {} presses, so nothing was \
         confirmed; its window was removed. Last screen:\n{screen}",
        screens::MAX_SELECTION_MOVES
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
    let pre_trusted = match &opts.pre_trust {
        Some(config) => Some(crate::claude::trust::pre_trust(config, &cwd)?),
        None => None,
    };
    let tmux = TmuxCalls::new(&opts.mux);
    let created = tmux.create(opts, &cwd, &argv).await?;
    let passed = match drive(&tmux, &created, opts.timeout).await {
        Ok(passed) => passed,
        Err(failure) => {
            if matches!(failure, LaunchError::HumanNeeded { .. }) {
                tmux.restore_exit_behaviour(&created).await;
            } else {
                tmux.remove(&created, &opts.placement).await;
            }
            return Err(failure);
        }
    };
    tmux.restore_exit_behaviour(&created).await;
    let session_id = match &opts.session_id {
        Some(id) => Some(id.clone()),
        None => match &opts.claude_home {
            Some(home) => learn_session_id(&tmux, home, created.pid).await,
            None => None,
        },
    };
    let target = PaneTarget::Tmux {
        pane: created.pane.clone(),
        session: Some(created.session_name.clone()),
    };
    let mapping = match (&opts.wake_dir, &session_id) {
        (None, _) => Mapping::NoWakeDir,
        (Some(_), None) => Mapping::NoSessionId,
        (Some(dir), Some(id)) => match set_entry(dir, id, &target) {
            Ok(_) => Mapping::Written,
            Err(err) => Mapping::Failed(err.to_string()),
        },
    };
    let mut prompt_typed = false;
    if let Some(prompt) = &opts.prompt {
        Injector::new(&opts.mux)
            .inject(&target, prompt, Deadline::after(INJECT_BUDGET))
            .await
            .map_err(|source| LaunchError::Prompt {
                pane: created.pane.clone(),
                source,
            })?;
        prompt_typed = true;
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
        prompt_typed,
    })
}

/// Poll the pane until the driver says ready, or the launch fails.
async fn drive(
    tmux: &TmuxCalls,
    created: &Created,
    timeout: Duration,
) -> Result<Vec<Passed>, LaunchError> {
    let started = Instant::now();
    let deadline = Deadline::after(timeout);
    let mut driver = Driver::new();
    let mut last_screen = String::new();
    let tmux_err = |source| LaunchError::Tmux {
        pane: created.pane.clone(),
        source,
    };
    loop {
        let probe = match tmux.probe(&created.pane).await {
            Ok(probe) => probe,
            Err(err) if is_missing_target(&err) => {
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
                None => tmux.wait_for_exit_status(&created.pane).await,
            };
            let screen = tmux
                .capture_with_history(&created.pane)
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
            Step::Press(key) => tmux.key(&created.pane, key).await.map_err(tmux_err)?,
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

fn halted(halt: Halt, tmux: &TmuxCalls, created: &Created, screen: &str) -> LaunchError {
    let screen = tidy_screen(screen);
    match halt {
        Halt::HumanNeeded(kind) => LaunchError::HumanNeeded {
            what: match kind {
                Screen::ApiKeyPrompt => {
                    "Claude Code asks whether to use the API key in its environment; approving a \
                     key is a human's decision (or pre-approve it in ~/.claude.json)"
                }
                _ => {
                    "Claude Code asks for a login; sign in in the pane, then launch again or carry on there"
                }
            },
            pane: created.pane.clone(),
            attach: tmux.attach_hint(&created.session_name),
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

/// The visible text worth quoting: no "Pane is dead" line, no trailing blank lines, runs of
/// blank lines squeezed to one, and API-key fragments (the key screen shows the key's tail)
/// masked so they do not end up in logs.
fn tidy_screen(screen: &str) -> String {
    let masked: Vec<String> = screen.lines().map(mask_keys).collect();
    let mut out: Vec<&str> = Vec::new();
    for line in &masked {
        let line = line.trim_end();
        if line.starts_with("Pane is dead") {
            continue;
        }
        if line.is_empty() && out.last().is_none_or(|last| last.is_empty()) {
            continue;
        }
        out.push(line);
    }
    while out.last().is_some_and(|line| line.is_empty()) {
        out.pop();
    }
    if out.is_empty() {
        "(blank)".into()
    } else {
        out.join("\n")
    }
}

/// Replace every word that looks like an Anthropic key (`sk-ant-...`) with a mask.
fn mask_keys(line: &str) -> String {
    if !line.contains(KEY_PREFIX) {
        return line.to_owned();
    }
    line.split(' ')
        .map(|word| {
            if word.contains(KEY_PREFIX) {
                "sk-ant-[masked]"
            } else {
                word
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The argv tail for `new-session`/`new-window`. tmux runs a single argument through `sh -c`,
/// so a lone command is shell-quoted to run exactly as given; and tmux reads an argument ending
/// in `;` as a command separator, so that `;` is escaped.
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
    if command.len() == 1 {
        return Ok(vec![shell_quote(first)]);
    }
    Ok(command
        .iter()
        .map(|arg| match arg.strip_suffix(';') {
            Some(head) => format!("{head}\\;"),
            None => arg.clone(),
        })
        .collect())
}

fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// Default session name: `<program>-<folder>`, restricted to letters, digits, `-` and `_`.
fn default_session_name(command: &[String], cwd: &Path) -> String {
    let program = command
        .first()
        .and_then(|p| Path::new(p).file_name())
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "agent".into());
    let folder = cwd
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let raw = if folder.is_empty() {
        program
    } else {
        format!("{program}-{folder}")
    };
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .take(MAX_DEFAULT_NAME_CHARS)
        .collect()
}

fn is_missing_target(err: &MuxError) -> bool {
    err.stderr()
        .is_some_and(|stderr| stderr.contains("can't find") || stderr.contains("no server running"))
}

/// The pane a launch created.
#[derive(Debug, Clone)]
struct Created {
    pane: String,
    session_name: String,
    session_id: String,
    window_id: String,
    pid: Option<u32>,
}

struct Probe {
    /// The pane's program has exited (its terminal closed).
    dead: bool,
    /// `exit status N` once tmux has reaped it, which can lag the terminal closing a little.
    status: Option<String>,
    screen: String,
}

/// The tmux calls of a launch, all under one binary and socket.
struct TmuxCalls {
    bin: PathBuf,
    socket: Option<PathBuf>,
}

impl TmuxCalls {
    fn new(mux: &MuxConfig) -> Self {
        Self {
            bin: mux.tmux_bin.clone(),
            socket: mux.tmux_socket.clone(),
        }
    }

    fn command(&self, label: &'static str) -> Invocation {
        let inv = Invocation::new(&self.bin, label);
        match &self.socket {
            Some(socket) => inv.arg("-S").arg(socket),
            None => inv,
        }
    }

    async fn run(&self, inv: &Invocation) -> Result<String, MuxError> {
        Ok(process::run(inv, Deadline::after(TMUX_CALL_BUDGET))
            .await?
            .stdout)
    }

    fn attach_hint(&self, session: &str) -> String {
        let socket = self
            .socket
            .as_ref()
            .map(|s| format!(" -S {}", shell_quote(&s.to_string_lossy())))
            .unwrap_or_default();
        format!("tmux{socket} attach -t {}", shell_quote(session))
    }

    async fn create(
        &self,
        opts: &LaunchOptions,
        cwd: &Path,
        argv: &[String],
    ) -> Result<Created, LaunchError> {
        match &opts.placement {
            Placement::NewSession => {
                let (base, explicit) = match &opts.name {
                    Some(name) => (name.clone(), true),
                    None => (default_session_name(&opts.command, cwd), false),
                };
                let attempts = if explicit { 1 } else { MAX_NAME_ATTEMPTS };
                let mut last_err = None;
                for n in 1..=attempts {
                    let name = if n == 1 {
                        base.clone()
                    } else {
                        format!("{base}-{n}")
                    };
                    match self.new_session(&name, cwd, argv).await {
                        Ok(created) => return Ok(created),
                        Err(err)
                            if !explicit
                                && err
                                    .stderr()
                                    .is_some_and(|s| s.contains("duplicate session")) =>
                        {
                            last_err = Some(err);
                        }
                        Err(source) => {
                            return Err(LaunchError::Create {
                                what: "session",
                                source,
                            });
                        }
                    }
                }
                Err(LaunchError::Create {
                    what: "session",
                    source: last_err.unwrap_or(MuxError::Output {
                        label: "tmux new-session",
                        detail: "no session name was free".into(),
                    }),
                })
            }
            Placement::NewWindow { target } => self
                .new_window(target.as_deref(), opts.name.as_deref(), cwd, argv)
                .await
                .map_err(|source| LaunchError::Create {
                    what: "window",
                    source,
                }),
        }
    }

    async fn new_session(
        &self,
        name: &str,
        cwd: &Path,
        argv: &[String],
    ) -> Result<Created, MuxError> {
        let mut inv = self
            .command("tmux new-session")
            .arg("new-session")
            .arg("-d")
            .arg("-P")
            .arg("-F")
            .arg(CREATED_FORMAT)
            .arg("-s")
            .arg(name)
            .arg("-c")
            .arg(cwd)
            .arg("-x")
            .arg(SESSION_WIDTH.to_string())
            .arg("-y")
            .arg(SESSION_HEIGHT.to_string())
            .arg("--");
        for arg in argv {
            inv = inv.arg(arg);
        }
        // Chained in the same tmux command so it applies to the new window before the agent can
        // exit: a dead pane stays readable instead of vanishing with its last screen.
        inv = inv
            .arg(";")
            .arg("set-option")
            .arg("-w")
            .arg("remain-on-exit")
            .arg("on");
        parse_created(&self.run(&inv).await?)
    }

    async fn new_window(
        &self,
        target: Option<&str>,
        name: Option<&str>,
        cwd: &Path,
        argv: &[String],
    ) -> Result<Created, MuxError> {
        let mut inv = self
            .command("tmux new-window")
            .arg("new-window")
            .arg("-d")
            .arg("-P")
            .arg("-F")
            .arg(CREATED_FORMAT);
        if let Some(target) = target {
            // A trailing ':' makes it a session target: the window goes to its next free index.
            inv = inv.arg("-t").arg(format!("{target}:"));
        }
        if let Some(name) = name {
            inv = inv.arg("-n").arg(name);
        }
        inv = inv.arg("-c").arg(cwd).arg("--");
        for arg in argv {
            inv = inv.arg(arg);
        }
        let created = parse_created(&self.run(&inv).await?)?;
        // A background window is not the "current" one a chained command would reach, so this
        // is a separate call; an agent that exits within these milliseconds reads as a vanished
        // pane instead of a dead one.
        let set = self
            .command("tmux set-option")
            .arg("set-option")
            .arg("-w")
            .arg("-t")
            .arg(&created.window_id)
            .arg("remain-on-exit")
            .arg("on");
        self.run(&set).await?;
        Ok(created)
    }

    /// Dead or alive, and the visible screen, in one tmux call.
    async fn probe(&self, pane: &str) -> Result<Probe, MuxError> {
        let inv = self
            .command("tmux capture-pane")
            .arg("display-message")
            .arg("-p")
            .arg("-t")
            .arg(pane)
            .arg(PROBE_FORMAT)
            .arg(";")
            .arg("capture-pane")
            .arg("-p")
            .arg("-t")
            .arg(pane);
        let out = self.run(&inv).await?;
        let (head, screen) = out.split_once('\n').unwrap_or((out.as_str(), ""));
        let (dead, status) = head.split_once('\t').unwrap_or((head, ""));
        let status = status.trim();
        Ok(Probe {
            dead: dead.trim() == "1",
            status: (!status.is_empty()).then(|| format!("exit status {status}")),
            screen: screen.to_owned(),
        })
    }

    /// The exit status of a dead pane, waiting up to [`EXIT_STATUS_WAIT`] for tmux to reap it.
    async fn wait_for_exit_status(&self, pane: &str) -> String {
        let deadline = Deadline::after(EXIT_STATUS_WAIT);
        loop {
            if let Ok(Probe {
                status: Some(status),
                ..
            }) = self.probe(pane).await
            {
                return status;
            }
            if deadline.expired() {
                return "it exited".into();
            }
            tokio::time::sleep(EXIT_STATUS_POLL).await;
        }
    }

    async fn capture_with_history(&self, pane: &str) -> Result<String, MuxError> {
        let inv = self
            .command("tmux capture-pane")
            .arg("capture-pane")
            .arg("-p")
            .arg("-S")
            .arg(format!("-{DEAD_PANE_HISTORY}"))
            .arg("-t")
            .arg(pane);
        self.run(&inv).await
    }

    async fn key(&self, pane: &str, key: Key) -> Result<(), MuxError> {
        let inv = self
            .command("tmux send-keys")
            .arg("send-keys")
            .arg("-t")
            .arg(pane)
            .arg(key.tmux_name());
        self.run(&inv).await.map(drop)
    }

    /// Drop the launch's remain-on-exit, so the agent's window closes when it exits later, as
    /// any other window of the server does. Best effort: a lingering dead pane is only untidy
    /// (the wake gate treats it as stale).
    async fn restore_exit_behaviour(&self, created: &Created) {
        let inv = self
            .command("tmux set-option")
            .arg("set-option")
            .arg("-w")
            .arg("-u")
            .arg("-t")
            .arg(&created.window_id)
            .arg("remain-on-exit");
        if let Err(err) = self.run(&inv).await {
            tracing::debug!(pane = %created.pane, error = %err, "could not unset remain-on-exit");
        }
    }

    /// Remove what the launch created; best effort (it may already be gone).
    async fn remove(&self, created: &Created, placement: &Placement) {
        let inv = match placement {
            Placement::NewSession => self
                .command("tmux kill-session")
                .arg("kill-session")
                .arg("-t")
                .arg(&created.session_id),
            Placement::NewWindow { .. } => self
                .command("tmux kill-window")
                .arg("kill-window")
                .arg("-t")
                .arg(&created.window_id),
        };
        if let Err(err) = self.run(&inv).await {
            tracing::debug!(pane = %created.pane, error = %err, "could not remove the failed launch's window");
        }
    }

    /// Pid → parent pid for every process, from `ps` (portable across Linux and macOS).
    async fn process_parents(&self) -> Result<HashMap<u32, u32>, MuxError> {
        let inv = Invocation::new(Path::new("ps"), "ps")
            .arg("-A")
            .arg("-o")
            .arg("pid=")
            .arg("-o")
            .arg("ppid=");
        let out = self.run(&inv).await?;
        Ok(out
            .lines()
            .filter_map(|line| {
                let mut fields = line.split_whitespace();
                let pid = fields.next()?.parse().ok()?;
                let ppid = fields.next()?.parse().ok()?;
                Some((pid, ppid))
            })
            .collect())
    }
}

fn parse_created(stdout: &str) -> Result<Created, MuxError> {
    let line = stdout.lines().next().unwrap_or("");
    let fields: Vec<&str> = line.split('\t').collect();
    match fields.as_slice() {
        [pane, session_name, session_id, window_id, pid] if pane.starts_with('%') => Ok(Created {
            pane: (*pane).to_owned(),
            session_name: (*session_name).to_owned(),
            session_id: (*session_id).to_owned(),
            window_id: (*window_id).to_owned(),
            pid: pid.parse().ok(),
        }),
        _ => Err(MuxError::Output {
            label: "tmux new-session",
            detail: format!("expected the new pane's ids, got {line:?}"),
        }),
    }
}

/// The session id from Claude Code's `sessions/<pid>.json` of any process in the pane's tree,
/// waiting up to [`REGISTRY_WAIT`] for the file.
async fn learn_session_id(
    tmux: &TmuxCalls,
    claude_home: &Path,
    pane_pid: Option<u32>,
) -> Option<String> {
    let root = pane_pid?;
    let registry = claude_home.join("sessions");
    let deadline = Deadline::after(REGISTRY_WAIT);
    loop {
        if let Ok(parents) = tmux.process_parents().await {
            for pid in process_tree(root, &parents) {
                if let Some(id) = read_registry(&registry.join(format!("{pid}.json"))) {
                    return Some(id);
                }
            }
        }
        if deadline.expired() {
            return None;
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// `root` and its descendants, breadth first, at most [`MAX_TREE_DEPTH`] levels down.
fn process_tree(root: u32, parents: &HashMap<u32, u32>) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (&pid, &ppid) in parents {
        if pid != ppid {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut queue = VecDeque::from([(root, 0usize)]);
    while let Some((pid, depth)) = queue.pop_front() {
        out.push(pid);
        if depth < MAX_TREE_DEPTH
            && let Some(kids) = children.get(&pid)
        {
            let mut kids = kids.clone();
            kids.sort_unstable();
            queue.extend(kids.into_iter().map(|kid| (kid, depth + 1)));
        }
    }
    out
}

/// The `sessionId` of one registry file, if it is there and plausible.
fn read_registry(path: &Path) -> Option<String> {
    use std::io::Read;
    let file = std::fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_REGISTRY_BYTES).read_to_end(&mut bytes).ok()?;
    let value: Value = serde_json::from_slice(&bytes).ok()?;
    let id = value.get("sessionId")?.as_str()?;
    (is_valid_string(id) && id.chars().count() <= MAX_SESSION_ID_CHARS).then(|| id.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_commands_are_quoted_and_trailing_semicolons_escaped() {
        assert_eq!(tmux_command_args(&["claude".into()]).unwrap(), ["'claude'"]);
        assert_eq!(
            tmux_command_args(&["/opt/my agent/it's".into()]).unwrap(),
            [r"'/opt/my agent/it'\''s'"]
        );
        assert_eq!(
            tmux_command_args(&["sh".into(), "-c".into(), "a; b;".into()]).unwrap(),
            ["sh", "-c", r"a; b\;"]
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
    fn created_line_parses() {
        let created = parse_created("%3\tclaude-x\t$1\t@2\t4242\n").unwrap();
        assert_eq!(created.pane, "%3");
        assert_eq!(created.session_id, "$1");
        assert_eq!(created.window_id, "@2");
        assert_eq!(created.pid, Some(4242));
        assert!(parse_created("garbage").is_err());
    }

    #[test]
    fn process_tree_walks_descendants_only() {
        let parents = HashMap::from([(10, 1), (11, 10), (12, 11), (20, 1), (13, 10)]);
        assert_eq!(process_tree(10, &parents), [10, 11, 13, 12]);
        // A self-parented entry (pid 0 on some systems) does not loop.
        let looped = HashMap::from([(0, 0), (5, 0)]);
        assert_eq!(process_tree(0, &looped), [0, 5]);
    }

    #[test]
    fn registry_ids_must_be_printable() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("1.json");
        std::fs::write(
            &good,
            r#"{"pid":1,"sessionId":"ac3ea6be-3f07","status":"idle"}"#,
        )
        .unwrap();
        assert_eq!(read_registry(&good).as_deref(), Some("ac3ea6be-3f07"));
        let bad = dir.path().join("2.json");
        std::fs::write(&bad, "{\"sessionId\":\"a\\u001bb\"}").unwrap();
        assert_eq!(read_registry(&bad), None);
        assert_eq!(read_registry(&dir.path().join("none.json")), None);
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
