//! The one way wakebridge types into a pane ([`Injector::inject`]), over the tmux and zellij
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

pub use inject::{InjectError, Injector};
pub use process::{MuxError, STEP_FLOOR};
pub use text::{KeystrokeText, TextError, WAKE_PROMPT};
pub use tmux::{PaneInfo, Tmux};
pub use zellij::{Zellij, ZellijPane};

/// Total time one injection may take, inside the bus's 5 s webhook budget next to the spool
/// write. The submit may overrun it by one [`STEP_FLOOR`], so the text is never left unsubmitted
/// merely because the budget ran out between the two keystroke calls.
pub const INJECT_BUDGET: Duration = Duration::from_secs(2);

/// A key pressed by name. Deliberately no Escape (it declines the trust dialog and interrupts a
/// turn) and no digit (digits answer menus). The strum name is tmux's: `Enter`, not `C-m`,
/// because newer tmux/Claude Code pairs submit only on the named key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
pub enum Key {
    Enter,
    Down,
    Up,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MuxConfig {
    pub tmux_bin: PathBuf,
    pub zellij_bin: PathBuf,
    /// `-S path`; `None` reaches tmux's default server for the daemon's uid.
    pub tmux_socket: Option<PathBuf>,
    /// Foreground process names that mean the agent is gone and the pane fell back to a shell.
    pub shells: Vec<String>,
    /// Longest pause between typing and Enter (docs/benchmarks.md, "Submit delay").
    pub submit_delay: Duration,
}

impl MuxConfig {
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
    fn default() -> Self {
        Self::from_settings(&crate::config::defaults().mux)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StaleReason {
    #[error("the pane does not exist")]
    PaneMissing,
    #[error("the pane's program has exited")]
    PaneDead,
    /// Only shells run in the pane's foreground process group: the agent is gone.
    #[error("the pane is a shell ({command}), the session is gone")]
    ShellInPane { command: String },
    #[error("no zellij session named {session:?}")]
    SessionMissing { session: String },
    #[error("zellij session {session:?} has exited")]
    SessionExited { session: String },
    /// Another session of an agent whose screens all look alike runs there, or none does.
    #[error(
        "no process in the pane holds the session's transcript open: it runs elsewhere or not at all"
    )]
    AnotherSession,
    #[error("could not tell what runs in the pane: {detail}")]
    Unreadable { detail: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaneState {
    Live,
    Stale(StaleReason),
    /// The input line already holds `input` (a draft, a selection, a text of ours whose submit
    /// was lost): typing would add to it and submit both.
    Occupied {
        input: String,
    },
    /// Copy mode (keys would drive the cursor) or a menu or dialog (keys would answer it).
    Held(&'static str),
}

/// A terminal multiplexer: each method is one step of an injection under the deadline given.
pub trait Mux: Send + Sync {
    type Pane: ?Sized + Sync;

    const NAME: &'static str;

    fn check_pane(
        &self,
        pane: &Self::Pane,
        deadline: Deadline,
    ) -> impl Future<Output = Result<PaneState, MuxError>> + Send;

    /// The processes on the pane's terminal; `None` where this multiplexer cannot tell.
    fn terminal_pids(
        &self,
        _pane: &Self::Pane,
        _deadline: Deadline,
    ) -> impl Future<Output = Result<Option<Vec<u32>>, MuxError>> + Send {
        async { Ok(None) }
    }

    /// `None` where this multiplexer cannot read it.
    fn screen(
        &self,
        pane: &Self::Pane,
        deadline: Deadline,
    ) -> impl Future<Output = Result<Option<String>, MuxError>> + Send;

    fn type_text(
        &self,
        pane: &Self::Pane,
        text: &KeystrokeText,
        deadline: Deadline,
    ) -> impl Future<Output = Result<(), MuxError>> + Send;

    fn submit(
        &self,
        pane: &Self::Pane,
        deadline: Deadline,
    ) -> impl Future<Output = Result<(), MuxError>> + Send;
}

/// Which of the configured tmux and zellij would start, for the startup INFO/WARN.
pub fn preflight_for(config: &MuxConfig, env: &crate::env::Env) -> Vec<&'static str> {
    let path = env.get("PATH").unwrap_or_default();
    [("tmux", &config.tmux_bin), ("zellij", &config.zellij_bin)]
        .into_iter()
        .filter(|(_, bin)| resolves(bin, OsStr::new(&path)))
        .map(|(name, _)| name)
        .collect()
}

pub fn resolves(bin: &Path, path: &OsStr) -> bool {
    if bin.components().count() > 1 || bin.is_absolute() {
        return is_executable(bin);
    }
    env::split_paths(path).any(|dir| is_executable(&dir.join(bin)))
}

fn is_executable(path: &Path) -> bool {
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
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
