//! The agent seam: which agent a session runs ([`Agent`], recorded once from its hooks,
//! `wakebridge hook --agent codex`; Claude Code's hooks name none, and shown wherever sessions
//! are), and each agent's answer to what differs between them. What an agent's files, hooks,
//! transcripts and screens look like is its own module's (`claude/`, `codex/`); everything
//! else (`session/`, `delivery/`, `context/`, `budget/`, the views) asks here, by the agent.

mod claude;
mod codex;
pub mod inbox;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::claude::settings::Wiring;
use crate::env::Env;
use crate::reading::inbox::Inbox;
use crate::reading::screen::{PromptReader, Screen, ScreenReading, Title};
use crate::reading::transcript::{LineReader, Turn};

/// What differs between agents, each answered from the agent's own module by its adapter here
/// (`agent/claude.rs`, `agent/codex.rs`). A third agent is a module of what it is, an adapter
/// and an [`Agent`] word.
pub trait Side: Sync {
    /// What of a hook's environment is the session's own: all of it where the hook runs in
    /// the session's process (its pane, its bus id, `WAKEBRIDGE=keep`), else only what says
    /// where the agent's files are.
    fn hook_env(&self, env: &Env) -> Env;
    /// What `wakebridge <agent> install` wires into its hooks file.
    fn wiring(&self) -> &'static Wiring;
    /// The inbox its hook announces for session `sid`, from the hook's environment.
    fn inbox_from_hook(&self, env: &Env, sid: &str) -> Option<Inbox>;
    /// The transcript of session `sid`: `hint` (its hooks' or status line's) where it is one of
    /// the session's own, else one found under the config dirs `homes`.
    fn transcript_of(&self, homes: &[PathBuf], sid: &str, hint: Option<PathBuf>)
    -> Option<PathBuf>;
    /// How a line of its transcript reads.
    fn transcript_reader(&self) -> LineReader;
    /// The account a session's transcript at `transcript` belongs to: the config home whose
    /// usage windows it shares.
    fn account_of(&self, transcript: &Path) -> Option<PathBuf>;
    /// What a capture of its pane shows: its prompt, a draft, a dialog, a running turn, a usage
    /// limit.
    fn read_screen(&self, capture: &str) -> ScreenReading;
    /// How its prompt reads where text is typed into its pane.
    fn prompt(&self) -> PromptReader;
    /// What its pane's title says.
    fn read_title(&self, title: &str) -> Title;
    /// How its limit menu's option that waits for the reset is found on a capture; `None`: it
    /// opens no such menu.
    fn limit_menu_wait(&self) -> Option<fn(&str) -> Option<u8>>;
    /// The newest turn of its transcript at `transcript` (blocking I/O); `None` where its turns
    /// are not read.
    fn last_turn(&self, transcript: &Path) -> Option<Turn>;
    /// How its first screens read, for the launcher.
    fn first_run_reader(&self) -> fn(&str) -> Screen;
    /// Whether it lists its live sessions where the launcher learns a new one's id (Claude
    /// Code's `<config>/sessions/<pid>.json`); else its hooks make it known.
    fn session_registry(&self) -> bool;
    /// Whether a hook ends a turn that failed (at a usage limit, say): Claude Code's
    /// StopFailure. Codex fires none, so its failed turn leaves the busy marker of its prompt.
    fn hook_ends_a_failed_turn(&self) -> bool;
    /// Whether it holds for a person the message its inbox took at `sent_ms` that nothing
    /// answered yet, as its transcript at `transcript` says (Claude Code in bypass mode holds a
    /// peer's message until a person lets it through).
    fn holds_for_a_person(&self, sent_ms: Option<i64>, transcript: Option<&Path>) -> bool;
    /// Why it is not rewound (a waiting rewind is skipped, one asked for refused), if it is not.
    fn not_rewound(&self) -> Option<&'static str>;
    /// Whether it goes on by itself once a usage limit resets (then it is given its time before
    /// a resume is sent).
    fn resumes_at_the_reset(&self) -> bool;
    /// Whether its pane is its session's only while a process on it holds the session's
    /// transcript open (a pane's screen cannot tell its sessions apart, nor does each map it).
    fn pane_holds_its_transcript(&self) -> bool;
}

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
    /// The agent's answers to what differs.
    pub fn side(self) -> &'static dyn Side {
        match self {
            Agent::Claude => &claude::ClaudeCode,
            Agent::Codex => &codex::Codex,
        }
    }

    /// The agent a command starts, by its program's name (`codex`, `/usr/bin/codex`); anything
    /// else is Claude Code's, the launcher's default.
    pub fn of_command(command: &[String]) -> Agent {
        let program = command.first().map(Path::new).and_then(Path::file_name);
        match program.and_then(|name| name.to_str()) {
            Some("codex") => Agent::Codex,
            _ => Agent::Claude,
        }
    }

    /// The agent the ledger recorded, by its word; an unknown or missing word (a ledger written
    /// before agents were recorded) is Claude Code, the only agent there was.
    pub fn of_recorded(word: Option<&str>) -> Agent {
        word.and_then(|w| w.parse().ok()).unwrap_or_default()
    }
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

    #[test]
    fn a_command_names_its_agent_by_its_program() {
        let of = |words: &[&str]| {
            Agent::of_command(&words.iter().map(ToString::to_string).collect::<Vec<_>>())
        };
        assert_eq!(of(&["codex", "say hello"]), Agent::Codex);
        assert_eq!(of(&["/opt/bin/codex"]), Agent::Codex);
        assert_eq!(of(&["claude", "--model", "x"]), Agent::Claude);
        assert_eq!(of(&["bash", "-c", "codex"]), Agent::Claude);
        assert_eq!(of(&[]), Agent::Claude);
    }
}
