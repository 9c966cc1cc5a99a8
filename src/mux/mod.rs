//! The one way wakebridge types into a pane: [`Injector::inject`] takes the pane's lock, runs
//! the stale-pane guard, types a validated [`KeystrokeText`], presses a separate Enter once the
//! text shows and reads the submit back, all inside one [`Deadline`]. tmux and zellij are the
//! [`Mux`] backends; every subprocess runs through [`process`]. Whether to wake is the caller's.

pub(crate) mod inject;
pub(crate) mod process;
pub(crate) mod ps;
pub(crate) mod text;
pub(crate) mod tmux;
pub(crate) mod zellij;

use std::env;
use std::ffi::OsStr;
use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::deadline::Deadline;

pub use inject::{InjectError, Injected, Injector};
pub use process::{MuxError, STEP_FLOOR};
pub use text::{KeystrokeText, TextError, WAKE_PROMPT};
pub use tmux::{PaneInfo, Tmux};
pub use zellij::{Zellij, ZellijPane};

/// Total time one injection may take, from the guard to the submit, as in the reference bridge.
/// It fits comfortably inside the bus's 5 s webhook budget next to the spool write. The submit
/// may overrun it by at most one [`STEP_FLOOR`], so the text is never left unsubmitted merely
/// because the budget ran out between the two keystroke calls.
pub const INJECT_BUDGET: Duration = Duration::from_secs(2);

/// A key pressed by name (never text): the submit after typed text, and what the launcher
/// answers first-run screens with. There is deliberately no Escape (it declines the trust
/// dialog and interrupts a turn) and no digit (digits answer menus and surveys).
/// Its strum name is the key's name for `tmux send-keys`: `Enter`, not `C-m`, because newer
/// tmux/Claude Code pairs submit only on the named key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
pub enum Key {
    Enter,
    Down,
    Up,
}

/// How to reach the multiplexers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MuxConfig {
    /// tmux binary; a bare name is looked up on the daemon's PATH.
    pub tmux_bin: PathBuf,
    /// zellij binary; a bare name is looked up on the daemon's PATH.
    pub zellij_bin: PathBuf,
    /// tmux server socket, passed as `-S path`. `None` reaches tmux's default server for the
    /// daemon's uid, as the reference bridge does.
    pub tmux_socket: Option<PathBuf>,
    /// Foreground process names that mean "the agent is gone and the pane fell back to a
    /// prompt": typing a wake there would run it as a shell command.
    pub shells: Vec<String>,
    /// Longest pause between typing the text and pressing Enter (Enter goes as soon as the text
    /// shows). Its default was measured: docs/benchmarks.md, "Submit delay".
    pub submit_delay: Duration,
}

impl MuxConfig {
    /// The `[mux]` settings as the backends use them (a blank socket is tmux's default server).
    pub fn from_settings(m: &crate::config::MuxSettings) -> Self {
        let socket = m.tmux_socket.trim();
        MuxConfig {
            tmux_bin: PathBuf::from(m.tmux_bin.trim()),
            zellij_bin: PathBuf::from(m.zellij_bin.trim()),
            tmux_socket: (!socket.is_empty()).then(|| PathBuf::from(socket)),
            shells: m.shells.clone(),
            submit_delay: m.submit_delay,
        }
    }
}

impl Default for MuxConfig {
    /// The `[mux]` defaults of `config/default.toml`.
    fn default() -> Self {
        Self::from_settings(&crate::config::defaults().mux)
    }
}

/// Why a pane must not be typed into.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StaleReason {
    /// The multiplexer does not know the pane (closed, or its server is gone).
    #[error("the pane does not exist")]
    PaneMissing,
    /// The pane's program exited; the pane is only kept for its output.
    #[error("the pane's program has exited")]
    PaneDead,
    /// Only shells run in the pane's foreground process group (tmux): the agent is gone and a
    /// prompt would run the text as a command. A wrapper shell whose group still runs the agent
    /// does not count.
    #[error("the pane is a shell ({command}), the session is gone")]
    ShellInPane { command: String },
    /// No zellij session of that name.
    #[error("no zellij session named {session:?}")]
    SessionMissing { session: String },
    /// The zellij session exited and is only resurrectable.
    #[error("zellij session {session:?} has exited")]
    SessionExited { session: String },
    /// The multiplexer's answer about the pane could not be read.
    #[error("could not tell what runs in the pane: {detail}")]
    Unreadable { detail: String },
}

/// The guard's verdict on a pane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaneState {
    Live,
    Stale(StaleReason),
    /// The agent's input line already holds `input` (a human's draft, a dialog's selection, or
    /// a text of ours whose submit was lost): typing would add to it and submit both, or answer
    /// the dialog.
    Occupied {
        input: String,
    },
    /// Something other than the input line holds the pane: tmux copy mode (someone is
    /// scrolling; keys would drive the copy cursor) or a menu or dialog (keys would answer it).
    Held(&'static str),
}

/// A terminal multiplexer that can check a pane and type into it. Each method is one step of
/// an injection and runs its subprocess(es) under the deadline it is given; [`inject`] strings
/// them together, spends the budget and holds the pane lock.
pub trait Mux: Send + Sync {
    /// How this multiplexer names a pane.
    type Pane: ?Sized + Sync;

    /// The name used in `action` values and logs (`"tmux"`, `"zellij"`).
    fn name(&self) -> &'static str;

    /// Is the pane there and does it still run something other than a shell?
    fn check_pane(
        &self,
        pane: &Self::Pane,
        deadline: Deadline,
    ) -> impl Future<Output = Result<PaneState, MuxError>> + Send;

    /// The pane's visible screen as plain text, `None` where this multiplexer cannot read it.
    fn screen(
        &self,
        pane: &Self::Pane,
        deadline: Deadline,
    ) -> impl Future<Output = Result<Option<String>, MuxError>> + Send;

    /// Type `text` literally, without submitting it.
    fn type_text(
        &self,
        pane: &Self::Pane,
        text: &KeystrokeText,
        deadline: Deadline,
    ) -> impl Future<Output = Result<(), MuxError>> + Send;

    /// Press Enter (submit what was typed).
    fn submit(
        &self,
        pane: &Self::Pane,
        deadline: Deadline,
    ) -> impl Future<Output = Result<(), MuxError>> + Send;
}

/// Which of the configured tmux and zellij would start, for the startup INFO/WARN (reference
/// 7.6): an explicit path is checked as is, a bare name is searched on the daemon's PATH.
pub fn preflight_for(config: &MuxConfig, env: &crate::env::Env) -> Vec<&'static str> {
    let path = env.get("PATH").unwrap_or_default();
    [("tmux", &config.tmux_bin), ("zellij", &config.zellij_bin)]
        .into_iter()
        .filter(|(_, bin)| resolves(bin, OsStr::new(&path)))
        .map(|(name, _)| name)
        .collect()
}

/// Would `bin` start: an executable file at that path, or, for a bare name, in a PATH entry.
pub fn resolves(bin: &Path, path: &OsStr) -> bool {
    if bin.components().count() > 1 || bin.is_absolute() {
        return is_executable(bin);
    }
    env::split_paths(path).any(|dir| is_executable(&dir.join(bin)))
}

fn is_executable(path: &Path) -> bool {
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_config_matches_the_reference() {
        let config = MuxConfig::default();
        assert_eq!(config.tmux_socket, None);
        assert_eq!(config.tmux_bin, PathBuf::from("tmux"));
        assert!(config.shells.iter().any(|s| s == "nu"));
        assert_eq!(config.shells.len(), 9);
        assert!(config.submit_delay + STEP_FLOOR < INJECT_BUDGET);
        assert_eq!(
            crate::config::MAX_SUBMIT_DELAY,
            INJECT_BUDGET - STEP_FLOOR * 2
        );
    }

    #[test]
    fn resolves_bare_names_on_path_and_explicit_paths() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("fakemux");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let plain = dir.path().join("notexec");
        std::fs::write(&plain, "").unwrap();
        let path = env::join_paths([Path::new("/nonexistent"), dir.path()]).unwrap();
        assert!(resolves(Path::new("fakemux"), &path));
        assert!(!resolves(Path::new("notexec"), &path));
        assert!(!resolves(Path::new("absent"), &path));
        assert!(resolves(&exe, OsStr::new("")));
        assert!(!resolves(&plain, OsStr::new("")));
    }
}
