//! tmux as a backend: the stale-pane guard, typing a line (`send-keys -l`, then a separate
//! named `Enter`), and the two read-only views the nudger needs (one `list-panes -a` snapshot of
//! every pane, and `capture-pane` of one pane's visible area). It builds argv and reads tmux's
//! answers; running them under a deadline is `process`'s job, and deciding when to type is the
//! caller's. Creating and driving a new pane for the launcher is [`create`]'s.

pub(crate) mod create;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::process::{self, Invocation, MuxError};
use super::ps::PS_BIN;
use super::text::KeystrokeText;
use super::{Key, Mux, MuxConfig, PaneState, StaleReason};
use crate::deadline::Deadline;

/// The guard's question to tmux: is the pane there, is its program alive, is it in copy mode,
/// what runs in it. The command goes last: it is the only field that could contain the separator.
const GUARD_FORMAT: &str =
    "#{pane_id}\t#{pane_dead}\t#{pane_in_mode}\t#{pane_tty}\t#{pane_current_command}";

/// One line per pane for [`Tmux::snapshot`]. The title goes last: it is set by the program in
/// the pane and may contain the separator, so it takes whatever is left of the line.
const SNAPSHOT_FORMAT: &str = "#{pane_id}\t#{pane_dead}\t#{pane_pid}\t#{window_activity}\t\
                               #{pane_current_command}\t#{pane_title}";

/// stderr fragments with which tmux says the target or its whole server does not exist (3.3a
/// wording: `no server running on ...` for the default socket, `error connecting to <path> (No
/// such file or directory)` or `(Connection refused)` for a `-S` socket), as opposed to tmux
/// itself failing (a permission problem, say), which stays an error.
const MISSING_TARGET_MARKERS: &[&str] = &[
    "can't find",
    "no server running",
    "(No such file or directory)",
    "(Connection refused)",
];

/// What tmux reports about one pane, for the nudger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneInfo {
    /// `%N`, tmux's server-wide pane id.
    pub pane_id: String,
    /// The pane's program exited and the pane is kept (remain-on-exit).
    pub dead: bool,
    /// Name of the pane's foreground process (`claude`, `bash`, ...).
    pub current_command: String,
    /// Pid of the pane's first process; absent if tmux printed none.
    pub pid: Option<u32>,
    /// Last output in the pane's window, epoch seconds (per window, not per pane).
    pub window_activity: Option<u64>,
    /// The pane title as set by its program (Claude Code: `✳ Claude Code` when idle).
    pub title: String,
}

/// The tmux backend. Cheap to clone; holds only configuration.
#[derive(Debug, Clone)]
pub struct Tmux {
    bin: PathBuf,
    socket: Option<PathBuf>,
    shells: Vec<String>,
}

impl Tmux {
    pub fn new(config: &MuxConfig) -> Self {
        Self {
            bin: config.tmux_bin.clone(),
            socket: config.tmux_socket.clone(),
            shells: config.shells.clone(),
        }
    }

    /// `tmux -u [-S socket]`, ready for the subcommand. `-u` because without a UTF-8 locale
    /// (launchd gives a daemon no LANG) tmux prints every non-printable byte of a format, the
    /// tab separators included, as `_`, and no pane could be read.
    fn command(&self, label: &'static str) -> Invocation {
        let inv = Invocation::new(&self.bin, label).arg("-u");
        match &self.socket {
            Some(socket) => inv.arg("-S").arg(socket),
            None => inv,
        }
    }

    /// Every pane on the server, keyed by pane id, from one `list-panes -a` call. No server
    /// running means no panes, not an error.
    pub async fn snapshot(
        &self,
        deadline: Deadline,
    ) -> Result<HashMap<String, PaneInfo>, MuxError> {
        let inv = self
            .command("tmux list-panes")
            .args(["list-panes", "-a", "-F", SNAPSHOT_FORMAT]);
        match process::run(&inv, deadline).await {
            Ok(done) => Ok(parse_snapshot(&done.stdout)),
            Err(MuxError::Exit { ref stderr, .. }) if names_missing_target(stderr) => {
                Ok(HashMap::new())
            }
            Err(err) => Err(err),
        }
    }

    /// The visible area of `pane` as plain text (no escape sequences).
    pub async fn capture(&self, pane: &str, deadline: Deadline) -> Result<String, MuxError> {
        let inv = self
            .command("tmux capture-pane")
            .args(["capture-pane", "-p", "-t", pane]);
        Ok(process::run(&inv, deadline).await?.stdout)
    }

    fn is_shell(&self, command: &str) -> bool {
        let name = command_name(command);
        self.shells.iter().any(|shell| shell == name)
    }
}

impl Mux for Tmux {
    type Pane = str;

    fn name(&self) -> &'static str {
        "tmux"
    }

    async fn check_pane(&self, pane: &str, deadline: Deadline) -> Result<PaneState, MuxError> {
        let inv = self
            .command("tmux display-message")
            .args(["display-message", "-p", "-t", pane])
            .arg(GUARD_FORMAT);
        let answer = match process::run(&inv, deadline).await {
            Ok(done) => classify_guard(pane, &done.stdout, |c| self.is_shell(c)),
            Err(MuxError::Exit { ref stderr, .. }) if names_missing_target(stderr) => {
                return Ok(PaneState::Stale(StaleReason::PaneMissing));
            }
            Err(err) => return Err(err),
        };
        let state = match answer {
            GuardAnswer::Settled(state) => state,
            GuardAnswer::ShellInFront { tty, command } => {
                // tmux names only the foreground process group's leader, so a wrapper (`sh -c
                // 'claude; exec sleep 1d'`, no job control) reads as `sh` while the agent runs
                // inside its group. The same `-o tpgid=,pgid=,comm= -t <tty>` works with procps
                // (Linux) and BSD ps (macOS).
                let inv = Invocation::new(Path::new(PS_BIN), "ps (pane foreground group)")
                    .args(["-o", "tpgid=,pgid=,comm=", "-t"])
                    .arg(tty);
                let listing = match process::run(&inv, deadline).await {
                    Ok(done) => done.stdout,
                    // ps (procps and BSD) exits 1, saying nothing, when no process has that
                    // terminal (seen once under the test suite's load, cause not found): then
                    // no agent is in front either.
                    Err(err) if err.is_silent_exit(1) => String::new(),
                    Err(err) => return Err(err),
                };
                if foreground_runs_non_shell(&listing, |c| self.is_shell(c)) {
                    PaneState::Live
                } else {
                    PaneState::Stale(StaleReason::ShellInPane { command })
                }
            }
        };
        Ok(state)
    }

    async fn screen(&self, pane: &str, deadline: Deadline) -> Result<Option<String>, MuxError> {
        self.capture(pane, deadline).await.map(Some)
    }

    async fn type_text(
        &self,
        pane: &str,
        text: &KeystrokeText,
        deadline: Deadline,
    ) -> Result<(), MuxError> {
        // `-l`: every character is typed literally, never read as a key name. The text cannot
        // start with '-' or end with ';' (KeystrokeText), so tmux cannot misparse it.
        let inv =
            self.command("tmux send-keys -l")
                .args(["send-keys", "-t", pane, "-l", text.as_str()]);
        process::run(&inv, deadline).await.map(drop)
    }

    async fn submit(&self, pane: &str, deadline: Deadline) -> Result<(), MuxError> {
        self.press(pane, Key::Enter, deadline).await
    }
}

fn names_missing_target(stderr: &str) -> bool {
    MISSING_TARGET_MARKERS.iter().any(|m| stderr.contains(m))
}

/// What the guard's `display-message` line says.
#[derive(Debug, PartialEq, Eq)]
enum GuardAnswer {
    Settled(PaneState),
    /// A shell leads the foreground group: look inside the group before calling it stale.
    ShellInFront {
        tty: String,
        command: String,
    },
}

/// Read the guard's one line. `display-message` does not fail for a target it cannot find
/// (tmux 3.3a prints the format with no pane, i.e. empty fields, and exits 0), so the pane id it
/// reports must be there and, for a `%N` target, be that pane. Anything unreadable counts as
/// stale: typing into a pane we cannot describe is worse than skipping one wake.
fn classify_guard(target: &str, stdout: &str, is_shell: impl Fn(&str) -> bool) -> GuardAnswer {
    let line = stdout.lines().next().unwrap_or("");
    let mut fields = line.splitn(5, '\t');
    let (Some(pane_id), Some(dead), Some(in_mode), Some(tty), Some(command)) = (
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
    ) else {
        return GuardAnswer::Settled(PaneState::Stale(StaleReason::Unreadable {
            detail: format!("tmux answered {line:?}"),
        }));
    };
    if pane_id.is_empty() || (target.starts_with('%') && pane_id != target) {
        return GuardAnswer::Settled(PaneState::Stale(StaleReason::PaneMissing));
    }
    if dead != "0" {
        return GuardAnswer::Settled(PaneState::Stale(StaleReason::PaneDead));
    }
    if in_mode != "0" {
        return GuardAnswer::Settled(PaneState::Held("copy mode"));
    }
    if is_shell(command) {
        let command = command_name(command).to_owned();
        if tty.is_empty() {
            return GuardAnswer::Settled(PaneState::Stale(StaleReason::ShellInPane { command }));
        }
        return GuardAnswer::ShellInFront {
            tty: tty.to_owned(),
            command,
        };
    }
    GuardAnswer::Settled(PaneState::Live)
}

/// From `ps -o tpgid=,pgid=,comm=` of a terminal: does any process of the terminal's foreground
/// group run something other than a shell? Background jobs and a prompt plugin's daemons sit
/// in their own groups and do not count.
fn foreground_runs_non_shell(listing: &str, is_shell: impl Fn(&str) -> bool) -> bool {
    listing.lines().any(|row| {
        let mut cols = row.split_whitespace();
        let (Some(tpgid), Some(pgid)) = (cols.next(), cols.next()) else {
            return false;
        };
        let command = cols.collect::<Vec<_>>().join(" ");
        tpgid == pgid && !command.is_empty() && !is_shell(&command)
    })
}

/// A process name as tmux may report it (`/bin/bash`, `-zsh` for a login shell) reduced to the
/// bare name compared against the shell list.
fn command_name(command: &str) -> &str {
    let base = command.rsplit('/').next().unwrap_or(command);
    base.strip_prefix('-').unwrap_or(base)
}

fn parse_snapshot(stdout: &str) -> HashMap<String, PaneInfo> {
    stdout
        .lines()
        .filter_map(parse_snapshot_line)
        .map(|info| (info.pane_id.clone(), info))
        .collect()
}

fn parse_snapshot_line(line: &str) -> Option<PaneInfo> {
    let mut fields = line.splitn(6, '\t');
    let pane_id = fields.next()?;
    if !pane_id.starts_with('%') {
        return None;
    }
    let dead = fields.next()?;
    let pid = fields.next()?;
    let activity = fields.next()?;
    let command = fields.next()?;
    let title = fields.next().unwrap_or("");
    Some(PaneInfo {
        pane_id: pane_id.to_owned(),
        dead: dead != "0",
        current_command: command.to_owned(),
        pid: pid.parse().ok(),
        window_activity: activity.parse().ok(),
        title: title.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shells(command: &str) -> bool {
        ["bash", "zsh", "sh"].contains(&command_name(command))
    }

    fn settled(state: PaneState) -> GuardAnswer {
        GuardAnswer::Settled(state)
    }

    #[test]
    fn guard_accepts_a_live_agent_pane() {
        assert_eq!(
            classify_guard("%3", "%3\t0\t0\t/dev/pts/1\tclaude\n", shells),
            settled(PaneState::Live)
        );
    }

    #[test]
    fn guard_refuses_dead_pane() {
        assert_eq!(
            classify_guard("%3", "%3\t1\t0\t/dev/pts/1\tclaude\n", shells),
            settled(PaneState::Stale(StaleReason::PaneDead))
        );
    }

    #[test]
    fn guard_holds_off_a_pane_in_copy_mode() {
        assert_eq!(
            classify_guard("%3", "%3\t0\t1\t/dev/pts/1\tclaude\n", shells),
            settled(PaneState::Held("copy mode"))
        );
    }

    #[test]
    fn guard_looks_into_the_group_when_a_shell_is_in_front() {
        for command in ["bash", "-zsh", "/bin/sh"] {
            assert_eq!(
                classify_guard("%3", &format!("%3\t0\t0\t/dev/pts/1\t{command}\n"), shells),
                GuardAnswer::ShellInFront {
                    tty: "/dev/pts/1".into(),
                    command: command_name(command).into()
                },
                "{command}"
            );
        }
    }

    #[test]
    fn foreground_group_with_an_agent_is_live_and_a_lone_shell_is_not() {
        // Wrapper shell running the agent in its own (foreground) group.
        assert!(foreground_runs_non_shell(
            " 100  100 bash\n 100  100 claude.exe\n",
            shells
        ));
        // Interactive shell at its prompt; a background job in another group does not count.
        assert!(!foreground_runs_non_shell(
            " 200  200 bash\n 200  310 gitstatusd\n",
            shells
        ));
        assert!(!foreground_runs_non_shell("", shells));
    }

    #[test]
    fn guard_treats_an_empty_or_other_pane_as_missing() {
        for answer in ["\t\t\t\t\n", "%4\t0\t0\t/dev/pts/1\tclaude\n"] {
            assert_eq!(
                classify_guard("%3", answer, shells),
                settled(PaneState::Stale(StaleReason::PaneMissing)),
                "{answer:?}"
            );
        }
        // A non-%N target (session:window.pane) resolves to whatever pane id tmux reports.
        assert_eq!(
            classify_guard("work:1.0", "%4\t0\t0\t/dev/pts/1\tclaude\n", shells),
            settled(PaneState::Live)
        );
    }

    #[test]
    fn guard_treats_unreadable_answer_as_stale() {
        assert!(matches!(
            classify_guard("%3", "", shells),
            GuardAnswer::Settled(PaneState::Stale(StaleReason::Unreadable { .. }))
        ));
    }

    #[test]
    fn snapshot_lines_parse_with_tabs_in_the_title() {
        let out = "%0\t0\t4242\t1796036759\tclaude\t\u{2733} Claude\tCode\n\
                   %1\t1\t\t\tbash\t\n\
                   garbage line\n";
        let panes = parse_snapshot(out);
        assert_eq!(panes.len(), 2);
        let first = &panes["%0"];
        assert_eq!(first.pid, Some(4242));
        assert_eq!(first.window_activity, Some(1_796_036_759));
        assert_eq!(first.title, "\u{2733} Claude\tCode");
        assert!(!first.dead);
        let second = &panes["%1"];
        assert!(second.dead);
        assert_eq!(second.pid, None);
        assert_eq!(second.current_command, "bash");
    }
}
