//! What an agent's pane shows, read by the agent's own reader (`claude::screen`,
//! `codex::screen`): a capture of its working screen ([`ScreenReading`]), its title, and the
//! first screens the launcher passes ([`Screen`]).

use super::limit::Notice;

/// What the pane title says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Title {
    Idle,
    Busy,
    Unknown,
}

/// What a capture says: the one reading every caller (the session loop, the injector's guard,
/// a rewind's wait for a fresh prompt) decides by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScreenReading {
    /// Hash of the content lines (input box, footer and spinner left out), to see the agent's
    /// output move between polls.
    pub hash: u64,
    /// A dialog that takes keys, or a question waiting for a human.
    pub dialog: bool,
    /// Of those, the dialog or menu that takes keys (typing would answer it): what it showed.
    pub modal: Option<&'static str>,
    /// The busy footer under the input box, or a spinner line right above it.
    pub turn_running: bool,
    /// The input line's text (a human's draft): typing now would add to it and submit both.
    pub draft: Option<String>,
    /// The agent's last line above the input box is a question (it waits on a person's answer).
    pub asked: bool,
    /// A usage limit as the screen shows it; `None`: the agent's reader cannot tell (Codex's
    /// screen is not read for one), so the screen says nothing either way.
    pub limit: Option<LimitShown>,
}

/// A usage limit as a screen shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitShown {
    /// Its notice, the screen's latest word.
    pub notice: Option<Notice>,
    /// The agent's limit menu is open, with an option that waits for the reset.
    pub menu: bool,
    /// The agent's own resume at the reset is armed (Claude Code's `Continuing automatically`).
    pub resuming_itself: bool,
}

/// How an agent's prompt reads where text is typed into its pane: the injector's guard, and its
/// watch for the typed text to show and then leave.
#[derive(Clone, Copy)]
pub struct PromptReader {
    /// The whole capture, as the agent's side reads it.
    pub read: fn(&str) -> ScreenReading,
    /// Whether a capture shows the prompt line at all (a frame mid-redraw may not).
    pub shown: fn(&str) -> bool,
    /// The prompt line's text.
    pub draft: fn(&str) -> Option<String>,
    /// The capture without the agent's own resume at a reset (Claude Code's auto-continue
    /// footer, which takes keys), for a resume typed over it.
    pub without_own_resume: fn(&str) -> String,
    /// What the prompt line shows instead of a long text it took as a paste.
    pub paste_marker: Option<&'static str>,
    /// Whether text is typed only where the prompt line shows: an agent that draws its dialogs
    /// in the prompt's place (Codex) may show one no phrase names.
    pub typed_only_at_the_prompt: bool,
    /// Whether its screen shows every running turn. Codex draws no busy row while a reply
    /// streams: its busy marker then holds every text back, whoever asks.
    pub shows_every_turn: bool,
}

/// What the pane shows, starting: the screens the launcher passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screen {
    /// Starting up (it can stay blank for tens of seconds offline).
    Blank,
    ThemePicker,
    SecurityNotes,
    /// The folder-trust dialog, in any wording. `yes_below_cursor`: press Down (else Up); true
    /// when no marker is visible.
    TrustDialog {
        yes_selected: bool,
        yes_below_cursor: bool,
    },
    ApiKeyPrompt,
    Login,
    /// New or changed hooks wait for a person's approval (Codex CLI).
    HooksReview,
    /// The idle input prompt inside its box, with no dialog on screen.
    Ready,
    Declined,
    ConnectFailed,
    Unknown,
}
