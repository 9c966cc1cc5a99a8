//! A restart (`wakebridge rewind --restart`): the agent is started again through the launcher,
//! with the re-hydration prompt as its first prompt, in its pane when that is there, else in a
//! new tmux session resuming the conversation (`claude --resume <id>`). The new session id takes
//! over the old one's address, as after a `/clear`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::clock;
use crate::launch::{self, LaunchError, LaunchOptions, Placement};
use crate::mux::{KeystrokeText, MuxConfig};
use crate::store::{Alias, Record, RewindOutcome, Store};
use crate::wakedir::reader::mapped_panes;
use crate::wakedir::target::PaneTarget;
use crate::wakedir::writer::{clear_entry, set_entry};

/// How a restart starts the agent.
#[derive(Debug, Clone)]
pub struct RestartSettings {
    pub command: Vec<String>,
    pub timeout: Duration,
    pub claude_home: Option<crate::claude::home::ClaudeHome>,
    pub mux: MuxConfig,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restart {
    /// The id the session goes by now.
    pub session_id: String,
    /// The id the rewind was asked for (its ledger row's).
    pub asked_as: String,
    pub pane: PaneTarget,
    /// The pane is there (alive or dead): start the agent in it.
    pub in_place: bool,
    pub message: KeystrokeText,
}

/// Performs `restart` and records how it ended; never fails (the ledger row says what happened).
pub async fn perform(restart: Restart, settings: RestartSettings, store: Store, wake_dir: PathBuf) {
    let sid = restart.session_id.as_str();
    let mut records = Vec::new();
    let (outcome, new_id, detail) = match start(&restart, &settings, &store, &wake_dir).await {
        Ok((new_id, typed, pane)) => {
            tracing::info!(
                session_id = sid,
                new_session_id = new_id.as_str(),
                in_place = restart.in_place,
                "restarted a session"
            );
            if new_id != sid {
                records.push(Record::Renamed(Alias {
                    old_id: sid.to_owned(),
                    new_id: new_id.clone(),
                    pane,
                    at_ms: clock::now_ms(),
                }));
            }
            let typed = if typed {
                RewindOutcome::Done
            } else {
                RewindOutcome::NotTyped
            };
            (typed, Some(new_id), None)
        }
        Err(detail) => {
            tracing::warn!(session_id = sid, "restart failed: {detail}");
            (RewindOutcome::Failed, None, Some(detail))
        }
    };
    records.push(Record::RewindEnded {
        session_id: restart.asked_as.clone(),
        outcome,
        new_id,
        detail,
        at_ms: clock::now_ms(),
    });
    if let Err(e) = store.record_all(records).await {
        tracing::warn!(error = %e, "could not record a restart in the ledger");
    }
}

/// Starts the agent: `(the id it goes by now, whether the prompt was typed, its pane as text)`.
async fn start(
    restart: &Restart,
    settings: &RestartSettings,
    store: &Store,
    wake_dir: &Path,
) -> Result<(String, bool, String), String> {
    let sid = restart.session_id.clone();
    let row = {
        let (store, sid) = (store.clone(), sid.clone());
        tokio::task::spawn_blocking(move || store.session(&sid))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?
            .unwrap_or_default()
    };
    let cwd = row.cwd.map(PathBuf::from).ok_or_else(|| {
        "no working directory known for the session (its hooks never reported one)".to_owned()
    })?;
    let resume = !restart.in_place
        && row
            .transcript_path
            .as_deref()
            .is_some_and(|p| Path::new(p).is_file());
    let placement = match &restart.pane {
        PaneTarget::Tmux { pane, .. } if restart.in_place => {
            Placement::Respawn { pane: pane.clone() }
        }
        PaneTarget::Tmux { .. } => Placement::NewSession,
        PaneTarget::Zellij { .. } => {
            return Err("restarting an agent in a zellij pane is not supported".into());
        }
    };
    let opts = LaunchOptions {
        cwd,
        name: None,
        command: command(&settings.command, resume.then_some(sid.as_str())),
        prompt: Some(restart.message.clone()),
        pre_trust: None,
        timeout: settings.timeout,
        wake_dir: Some(wake_dir.to_owned()),
        session_id: None,
        claude_home: settings.claude_home.clone(),
        placement,
        mux: settings.mux.clone(),
    };
    let (launched_pane, typed) = match launch::launch(&opts).await {
        Ok(launched) => (launched.pane, launched.prompt_typed),
        // Started and ready, but the prompt did not go in: a restart all the same.
        Err(LaunchError::Prompt { pane, .. }) => (pane, false),
        Err(error) => return Err(error.to_string()),
    };
    let pane = PaneTarget::Tmux {
        pane: launched_pane,
        session: None,
    };
    // The new agent's id, as the launcher (from Claude Code's registry) or its SessionStart hook
    // mapped it to the pane; without one, the old id names the agent in its pane.
    let shown = pane.to_string();
    let mapped = mapped_panes(wake_dir)
        .into_iter()
        .find(|(id, target)| *id != sid && target.to_string() == shown)
        .map(|(id, _)| id);
    let current = match mapped {
        Some(id) => {
            // A new pane: the old id's entry would still name the one that died.
            clear_entry(wake_dir, &sid, None).map_err(|e| e.to_string())?;
            id
        }
        None => {
            set_entry(wake_dir, &sid, &pane).map_err(|e| e.to_string())?;
            sid
        }
    };
    Ok((current, typed, shown))
}

/// `[launch] command`, with `--resume <id>` when reviving Claude Code's conversation `resume`
/// (only for a command that runs `claude` itself: another program would not know the flag).
fn command(configured: &[String], resume: Option<&str>) -> Vec<String> {
    let mut argv = configured.to_vec();
    let runs_claude = configured
        .first()
        .and_then(|program| Path::new(program).file_name())
        .is_some_and(|name| name == "claude");
    if let Some(id) = resume.filter(|_| runs_claude) {
        argv.extend(["--resume".to_owned(), id.to_owned()]);
    }
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_claude_itself_is_told_to_resume() {
        let claude = vec![
            "/usr/bin/claude".to_owned(),
            "--model".to_owned(),
            "x".to_owned(),
        ];
        assert_eq!(
            command(&claude, Some("abc")),
            ["/usr/bin/claude", "--model", "x", "--resume", "abc"]
        );
        assert_eq!(command(&claude, None), claude);
        let other = vec!["python3".to_owned(), "agent.py".to_owned()];
        assert_eq!(command(&other, Some("abc")), other);
    }
}
