//! tmux as a backend: the stale-pane guard, typing (`send-keys -l`, then a named `Enter`), one
//! `list-panes -a` snapshot and `capture-pane`. New panes for the launcher are [`create`]'s.

pub(crate) mod create;

use std::collections::HashMap;
use std::path::PathBuf;

use super::process::{self, Invocation, MuxError};
use super::ps::{self, TerminalProcess};
use super::text::KeystrokeText;
use super::{Key, Mux, MuxConfig, PaneState, StaleReason};
use crate::deadline::Deadline;

/// The guard's question to tmux. The command goes last: the only field that could hold a tab.
const GUARD_FORMAT: &str = "#{pane_id}\t#{pane_pid}\t#{pane_dead}\t#{pane_in_mode}\t#{pane_tty}\t\
                            #{pane_current_command}";

/// One line per pane. The title, set by the pane's program, goes last: it may hold a tab.
const SNAPSHOT_FORMAT: &str = "#{pane_id}\t#{pane_dead}\t#{pane_pid}\t#{window_activity}\t\
                               #{pane_current_command}\t#{pane_title}";

/// stderr fragments with which tmux (3.3a) says the target or its whole server does not exist,
/// as opposed to tmux itself failing (a permission problem), which stays an error.
const MISSING_TARGET_MARKERS: &[&str] = &[
    "can't find",
    "no server running",
    "(No such file or directory)",
    "(Connection refused)",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneInfo {
    pub pane_id: String,
    pub dead: bool,
    pub current_command: String,
    pub pid: Option<u32>,
    /// Epoch seconds, per window, not per pane.
    pub window_activity: Option<u64>,
    pub title: String,
}

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

    /// `tmux -u [-S socket]`. `-u`: without a UTF-8 locale (launchd gives a daemon no LANG)
    /// tmux prints the tab separators as `_`, and no pane could be read.
    fn command(&self, label: &'static str) -> Invocation {
        let inv = Invocation::new(&self.bin, label).arg("-u");
        match &self.socket {
            Some(socket) => inv.arg("-S").arg(socket),
            None => inv,
        }
    }

    /// Every pane on the server by id; no server running means no panes, not an error.
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

    const NAME: &'static str = "tmux";

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
        Ok(match answer {
            GuardAnswer::Settled(state) => state,
            GuardAnswer::ShellInFront {
                pane_pid,
                tty,
                command,
            } => {
                // tmux names only the foreground process group's leader, so a wrapper (`sh -c
                // 'claude; exec sleep 1d'`, no job control) reads as `sh` while the agent runs
                // inside its group: look at the processes on the pane's terminal.
                let listing = ps::on_terminal(&tty, deadline).await?;
                let processes = ps::parse_terminal(&listing);
                let agent = agent_behind_shell(&processes, pane_pid, |c| self.is_shell(c));
                let listing = listing.trim_end();
                if let Some(agent) = agent {
                    tracing::debug!(
                        pane,
                        pane_pid,
                        tty,
                        listing = ?listing,
                        "stale-pane guard: tmux names {command} in front of pane {pane} \
                         and {} (pid {}) runs in its group: live",
                        agent.command,
                        agent.pid
                    );
                    PaneState::Live
                } else {
                    tracing::info!(
                        pane,
                        pane_pid,
                        tty,
                        listing = ?listing,
                        "stale-pane guard: tmux names {command} in front of pane {pane} \
                         and no agent runs in its group: refusing to type into it"
                    );
                    PaneState::Stale(StaleReason::ShellInPane { command })
                }
            }
        })
    }

    async fn terminal_pids(
        &self,
        pane: &str,
        deadline: Deadline,
    ) -> Result<Option<Vec<u32>>, MuxError> {
        let inv = self
            .command("tmux display-message (the pane's terminal)")
            .args(["display-message", "-p", "-t", pane, "#{pane_tty}"]);
        let tty = process::run(&inv, deadline).await?.stdout;
        let tty = tty.trim();
        if tty.is_empty() {
            return Ok(None);
        }
        let listing = ps::on_terminal(tty, deadline).await?;
        Ok(Some(
            ps::parse_terminal(&listing).iter().map(|p| p.pid).collect(),
        ))
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
        // `-l`: typed literally, never a key name; KeystrokeText rules out a leading '-' or a
        // trailing ';', which tmux would misparse.
        let args = ["send-keys", "-t", pane, "-l", text.as_str()];
        let inv = self.command("tmux send-keys -l").args(args);
        process::run(&inv, deadline).await.map(drop)
    }

    async fn submit(&self, pane: &str, deadline: Deadline) -> Result<(), MuxError> {
        self.press(pane, Key::Enter, deadline).await
    }
}

fn names_missing_target(stderr: &str) -> bool {
    MISSING_TARGET_MARKERS.iter().any(|m| stderr.contains(m))
}

#[derive(Debug, PartialEq, Eq)]
enum GuardAnswer {
    Settled(PaneState),
    /// A shell leads the foreground group: look inside the group before calling it stale.
    ShellInFront {
        pane_pid: u32,
        tty: String,
        command: String,
    },
}

/// Read the guard's one line. `display-message` exits 0 with empty fields for a target it
/// cannot find, so the pane id must be there and be the target's. Anything unreadable is stale:
/// typing into a pane we cannot describe is worse than skipping one wake.
fn classify_guard(target: &str, stdout: &str, is_shell: impl Fn(&str) -> bool) -> GuardAnswer {
    let line = stdout.lines().next().unwrap_or("");
    let fields: Vec<&str> = line.splitn(6, '\t').collect();
    let [pane_id, pane_pid, dead, in_mode, tty, command] = fields[..] else {
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
        let Ok(pane_pid) = pane_pid.parse() else {
            return GuardAnswer::Settled(PaneState::Stale(StaleReason::Unreadable {
                detail: format!("tmux gave no pid for the pane: {line:?}"),
            }));
        };
        return GuardAnswer::ShellInFront {
            pane_pid,
            tty: tty.to_owned(),
            command,
        };
    }
    GuardAnswer::Settled(PaneState::Live)
}

/// When tmux named a shell as the pane's foreground: a process of the pane's own session that
/// runs something other than a shell inside that shell's foreground group, if any.
///
/// The group's leader never vouches: when ps names it otherwise than tmux did, the pane changed
/// between the two looks, maybe from no agent at all (tmux's own fork before it runs the pane's
/// command). A guard run in that moment once typed a wake into the shell that started next.
fn agent_behind_shell(
    processes: &[TerminalProcess],
    pane_pid: u32,
    is_shell: impl Fn(&str) -> bool,
) -> Option<&TerminalProcess> {
    ps::in_session(processes, pane_pid)
        .into_iter()
        .find(|p| p.tpgid == Some(p.pgid) && p.pid != p.pgid && !is_shell(&p.command))
}

/// `/bin/bash` or `-zsh` (a login shell) as the bare name.
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
    let mut next = || fields.next();
    let (pane_id, dead, pid, activity, command) = (next()?, next()?, next()?, next()?, next()?);
    pane_id.starts_with('%').then_some(())?;
    let title = next().unwrap_or("");
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
            classify_guard("%3", "%3\t4242\t0\t0\t/dev/pts/1\tclaude\n", shells),
            settled(PaneState::Live)
        );
    }

    #[test]
    fn guard_refuses_dead_pane() {
        assert_eq!(
            classify_guard("%3", "%3\t\t1\t0\t/dev/pts/1\tclaude\n", shells),
            settled(PaneState::Stale(StaleReason::PaneDead))
        );
    }

    #[test]
    fn guard_holds_off_a_pane_in_copy_mode() {
        assert_eq!(
            classify_guard("%3", "%3\t4242\t0\t1\t/dev/pts/1\tclaude\n", shells),
            settled(PaneState::Held("copy mode"))
        );
    }

    #[test]
    fn guard_looks_into_the_group_when_a_shell_is_in_front() {
        for command in ["bash", "-zsh", "/bin/sh"] {
            assert_eq!(
                classify_guard(
                    "%3",
                    &format!("%3\t4242\t0\t0\t/dev/pts/1\t{command}\n"),
                    shells
                ),
                GuardAnswer::ShellInFront {
                    pane_pid: 4242,
                    tty: "/dev/pts/1".into(),
                    command: command_name(command).into()
                },
                "{command}"
            );
        }
    }

    #[test]
    fn guard_without_a_pane_pid_cannot_look_into_the_group() {
        assert!(matches!(
            classify_guard("%3", "%3\t\t0\t0\t/dev/pts/1\tbash\n", shells),
            GuardAnswer::Settled(PaneState::Stale(StaleReason::Unreadable { .. }))
        ));
    }

    /// `ps -o pid=,ppid=,tpgid=,pgid=,sid=,comm= -t <tty>` rows, as procps prints them.
    fn listing(rows: &str) -> Vec<TerminalProcess> {
        rows.lines()
            .filter_map(|row| {
                let cols: Vec<&str> = row.split_whitespace().collect();
                let number = |i: usize| cols.get(i)?.parse().ok();
                Some(TerminalProcess {
                    pid: number(0)?,
                    ppid: number(1)?,
                    tpgid: number(2),
                    pgid: number(3)?,
                    sid: Some(number(4)?),
                    command: cols.get(5..)?.join(" "),
                })
            })
            .collect()
    }

    fn vouched(rows: &str) -> Option<u32> {
        agent_behind_shell(&listing(rows), 100, shells).map(|p| p.pid)
    }

    #[test]
    fn an_agent_inside_the_shells_group_is_live() {
        // Wrapper shell (the pane's first process) running the agent in its foreground group.
        assert_eq!(
            vouched(" 100 1 100 100 100 bash\n 120 100 100 100 100 claude.exe\n"),
            Some(120)
        );
        // The same agent after its wrapper's parent link is gone: the session still says.
        assert_eq!(
            vouched(" 100 1 100 100 100 bash\n 120 1 100 100 100 claude\n"),
            Some(120)
        );
    }

    #[test]
    fn a_lone_shell_and_its_background_jobs_are_not() {
        // Interactive shell at its prompt; a background job in another group does not count.
        assert_eq!(
            vouched(" 100 1 100 100 100 bash\n 310 100 100 310 100 gitstatusd\n"),
            None
        );
        assert_eq!(vouched(""), None);
    }

    #[test]
    fn another_sessions_process_on_the_terminal_never_vouches() {
        // A process of another session leading the terminal's foreground group, and one
        // inside it: neither speaks for the pane's session, whose shell is alone.
        assert_eq!(
            vouched(
                " 100 1 300 100 100 bash\n 300 1 300 300 300 claude\n 301 300 300 300 300 node\n"
            ),
            None
        );
        // Each row's tpgid is its own terminal's: a process of an ended session on a reused
        // terminal number would lead "its" foreground group.
        assert_eq!(
            vouched(" 100 1 100 100 100 bash\n 300 1 300 300 300 claude\n"),
            None
        );
    }

    #[test]
    fn the_group_leader_tmux_named_never_vouches() {
        // A pane in its first moments: tmux named the start command (`bash`) because no
        // process had the terminal yet; by the time ps looks, tmux's own fork has it, before
        // it runs the command.
        assert_eq!(vouched(" 100 42 100 100 100 tmux: server\n"), None);
        // A leader that is no shell, whatever it is, with a shell beside it.
        assert_eq!(
            vouched(" 100 42 100 100 100 claude\n 105 100 100 100 100 bash\n"),
            None
        );
    }

    #[test]
    fn guard_treats_an_empty_or_other_pane_as_missing() {
        for answer in ["\t\t\t\t\t\n", "%4\t4242\t0\t0\t/dev/pts/1\tclaude\n"] {
            assert_eq!(
                classify_guard("%3", answer, shells),
                settled(PaneState::Stale(StaleReason::PaneMissing)),
                "{answer:?}"
            );
        }
        // A non-%N target (session:window.pane) resolves to whatever pane id tmux reports.
        assert_eq!(
            classify_guard("work:1.0", "%4\t4242\t0\t0\t/dev/pts/1\tclaude\n", shells),
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
