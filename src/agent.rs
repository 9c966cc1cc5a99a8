//! Which agent a session runs, and what each agent's hooks say about where it is. The word is
//! recorded once from the session's hooks (`wakebridge hook --agent codex`; Claude Code's hooks
//! name none) and shown wherever sessions are (`/sessions`, `status`'s AGENT column). What an
//! agent's files, hooks and screens look like is its own module's (`claude/`, `codex/`), in the
//! vocabulary this one gives them ([`Wiring`]).

use serde::{Deserialize, Serialize};

#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantNames,
    clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum Agent {
    /// Claude Code: its hooks run in the agent's own process, in its pane.
    #[default]
    Claude,
    /// OpenAI's Codex CLI: its hooks run in a background app-server shared by every Codex TUI of
    /// the user, with the environment of whichever TUI started it.
    Codex,
}

crate::strum_as_str!(Agent);

impl Agent {
    /// Whether a hook's `TMUX_PANE` (or zellij's pane variables) is the pane this session runs
    /// in. Not for Codex: a second TUI's hooks report the first one's pane, and typing there
    /// would reach another session.
    pub fn hook_knows_its_pane(self) -> bool {
        match self {
            Agent::Claude => true,
            Agent::Codex => false,
        }
    }

    /// The agent the ledger recorded, by its word; an unknown or missing word (a ledger written
    /// before agents were recorded) is Claude Code, the only agent there was.
    pub fn of_recorded(word: Option<&str>) -> Agent {
        word.and_then(|w| w.parse().ok()).unwrap_or_default()
    }
}

/// What install wires into an agent's hooks file, all in Claude Code's shape (`{"hooks":
/// {"Stop": [{"matcher": ..., "hooks": [{"type": "command", ...}]}]}}`), which Codex CLI reads
/// too.
#[derive(Debug, Clone, Copy)]
pub struct Wiring {
    /// `(event, matcher)` pairs; `None`: the agent's file has no matcher for that event.
    pub events: &'static [(&'static str, Option<&'static str>)],
    /// What the hook command says after `hook` (` --agent codex`), with its leading blank.
    pub hook_args: &'static str,
    /// Whether the file takes wakebridge's status line.
    pub statusline: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_agent_reads_back_as_itself_and_the_unknown_as_claude() {
        for agent in [Agent::Claude, Agent::Codex] {
            assert_eq!(Agent::of_recorded(Some(agent.as_str())), agent);
        }
        assert_eq!(Agent::Codex.as_str(), "codex");
        assert_eq!(Agent::of_recorded(Some("gemini")), Agent::Claude);
        assert_eq!(Agent::of_recorded(None), Agent::Claude);
    }
}
