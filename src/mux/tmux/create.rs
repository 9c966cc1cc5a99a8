//! The tmux calls that bring a new agent pane up for the launcher, with `remain-on-exit` on (an
//! agent that dies at start leaves its last screen readable), probe it, and clean up.

use std::path::Path;

use super::{Tmux, names_missing_target};
use crate::deadline::Deadline;
use crate::mux::Key;
use crate::mux::process::{self, MuxError};

/// What `tmux new-session/new-window -P` prints about the new pane.
const CREATED_FORMAT: &str =
    "#{pane_id}\t#{session_name}\t#{session_id}\t#{window_id}\t#{pane_pid}";
const PROBE_FORMAT: &str = "#{pane_dead}\t#{pane_dead_status}";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPane {
    pub pane: String,
    pub session_name: String,
    pub session_id: String,
    pub window_id: String,
    pub pid: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub dead: bool,
    /// `exit status N` once tmux has reaped it, which can lag the terminal closing a little.
    pub status: Option<String>,
    pub screen: String,
}

impl Tmux {
    /// A detached session running `argv` (one element goes through `sh -c`).
    pub async fn new_session(
        &self,
        name: &str,
        cwd: &Path,
        (width, height): (u16, u16),
        argv: &[String],
        deadline: Deadline,
    ) -> Result<NewPane, MuxError> {
        let inv = self
            .command("tmux new-session")
            .args(["new-session", "-d", "-P", "-F", CREATED_FORMAT])
            .args(["-s", name, "-c"])
            .arg(cwd)
            .args(["-x", &width.to_string(), "-y", &height.to_string(), "--"])
            .args(argv)
            // Chained in the same tmux command so it applies to the new window before the
            // agent can exit: a dead pane stays readable instead of vanishing with its screen.
            .args([";", "set-option", "-w", "remain-on-exit", "on"]);
        parse_created(&process::run(&inv, deadline).await?.stdout)
    }

    /// A background window in `session` (the caller's own when `None`).
    pub async fn new_window(
        &self,
        session: Option<&str>,
        name: Option<&str>,
        cwd: &Path,
        argv: &[String],
        deadline: Deadline,
    ) -> Result<NewPane, MuxError> {
        let args = ["new-window", "-d", "-P", "-F", CREATED_FORMAT];
        let mut inv = self.command("tmux new-window").args(args);
        if let Some(session) = session {
            // A trailing ':' makes it a session target: the window goes to its next free index.
            inv = inv.arg("-t").arg(format!("{session}:"));
        }
        if let Some(name) = name {
            inv = inv.arg("-n").arg(name);
        }
        inv = inv.arg("-c").arg(cwd).arg("--").args(argv);
        let created = parse_created(&process::run(&inv, deadline).await?.stdout)?;
        // A background window is not the "current" one a chained command would reach, so this
        // is a separate call; an agent that exits within these milliseconds reads as a vanished
        // pane instead of a dead one.
        self.keep_dead_pane(&created.window_id, true, deadline)
            .await?;
        Ok(created)
    }

    /// Starts `argv` in `pane` again, killing what runs there; the pane and its id are kept.
    pub async fn respawn(
        &self,
        pane: &str,
        cwd: &Path,
        argv: &[String],
        deadline: Deadline,
    ) -> Result<NewPane, MuxError> {
        let inv = self
            .command("tmux respawn-pane")
            .args(["respawn-pane", "-k", "-t", pane, "-c"])
            .arg(cwd)
            .args(argv)
            .args([";", "set-option", "-p", "-t", pane, "remain-on-exit", "on"])
            .args([";", "display-message", "-p", "-t", pane, CREATED_FORMAT]);
        parse_created(&process::run(&inv, deadline).await?.stdout)
    }

    /// Dead or alive, and the visible screen, in one tmux call.
    pub async fn probe(&self, pane: &str, deadline: Deadline) -> Result<Probe, MuxError> {
        let inv = self
            .command("tmux capture-pane")
            .args(["display-message", "-p", "-t", pane, PROBE_FORMAT])
            .args([";", "capture-pane", "-p", "-t", pane]);
        let out = process::run(&inv, deadline).await?.stdout;
        let (head, screen) = out.split_once('\n').unwrap_or((out.as_str(), ""));
        let (dead, status) = head.split_once('\t').unwrap_or((head, ""));
        let status = status.trim();
        Ok(Probe {
            dead: dead.trim() == "1",
            status: (!status.is_empty()).then(|| format!("exit status {status}")),
            screen: screen.to_owned(),
        })
    }

    pub async fn capture_history(
        &self,
        pane: &str,
        lines: u32,
        deadline: Deadline,
    ) -> Result<String, MuxError> {
        let inv = self
            .command("tmux capture-pane")
            .args(["capture-pane", "-p", "-S"])
            .arg(format!("-{lines}"))
            .args(["-t", pane]);
        Ok(process::run(&inv, deadline).await?.stdout)
    }

    pub async fn press(&self, pane: &str, key: Key, deadline: Deadline) -> Result<(), MuxError> {
        let inv = self
            .command("tmux send-keys")
            .args(["send-keys", "-t", pane])
            .arg(<&'static str>::from(key));
        process::run(&inv, deadline).await.map(drop)
    }

    /// Keep the window's (`@N`) or one pane's (`%N`) panes after their program exits, or
    /// (`false`) unset the option to inherit it again.
    pub async fn keep_dead_pane(
        &self,
        target: &str,
        keep: bool,
        deadline: Deadline,
    ) -> Result<(), MuxError> {
        let scope = if target.starts_with('%') { "-p" } else { "-w" };
        let set_or_unset = if keep { "-t" } else { "-ut" };
        let args = ["set-option", scope, set_or_unset, target, "remain-on-exit"];
        let inv = self.command("tmux set-option").args(args);
        let inv = if keep { inv.arg("on") } else { inv };
        process::run(&inv, deadline).await.map(drop)
    }

    /// Kill a session (`$N` or a name) or, with `window`, one window (`@N`).
    pub async fn kill(
        &self,
        target: &str,
        window: bool,
        deadline: Deadline,
    ) -> Result<(), MuxError> {
        let (label, verb) = match window {
            true => ("tmux kill-window", "kill-window"),
            false => ("tmux kill-session", "kill-session"),
        };
        let inv = self.command(label).args([verb, "-t", target]);
        process::run(&inv, deadline).await.map(drop)
    }

    pub fn attach_command(&self, session: &str) -> String {
        let socket = self.socket.as_ref().map(|s| s.to_string_lossy());
        let mut words = vec!["tmux"];
        words.extend(socket.as_deref().map(|s| ["-S", s]).into_iter().flatten());
        words.extend(["attach", "-t", session]);
        shlex::try_join(words.iter().copied()).unwrap_or_else(|_| words.join(" "))
    }
}

/// Whether tmux failed because the pane (or its whole server) is gone.
pub fn is_missing_target(err: &MuxError) -> bool {
    err.stderr().is_some_and(names_missing_target)
}

fn parse_created(stdout: &str) -> Result<NewPane, MuxError> {
    let line = stdout.lines().next().unwrap_or("");
    let fields: Vec<&str> = line.split('\t').collect();
    match fields.as_slice() {
        [pane, session_name, session_id, window_id, pid] if pane.starts_with('%') => Ok(NewPane {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_line_parses() {
        let pane = parse_created("%7\twork\t$2\t@5\t4242\n").unwrap();
        assert_eq!(pane.pane, "%7");
        assert_eq!(pane.session_name, "work");
        assert_eq!(pane.session_id, "$2");
        assert_eq!(pane.window_id, "@5");
        assert_eq!(pane.pid, Some(4242));
        assert!(parse_created("no pane here\n").is_err());
    }

    #[test]
    fn attach_command_quotes_the_socket_and_session() {
        let tmux = Tmux {
            bin: "tmux".into(),
            socket: Some("/tmp/a b/sock".into()),
            shells: Vec::new(),
        };
        assert_eq!(
            tmux.attach_command("it's"),
            r#"tmux -S '/tmp/a b/sock' attach -t "it's""#
        );
    }
}
