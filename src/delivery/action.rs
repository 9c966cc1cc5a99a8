//! The `action` vocabulary: what became of a delivered event, in the reference bridge's words
//! (`tmux`, `spool-busy`, ...). A leaf: the gate produces actions, the pipeline, dedupe, ledger
//! and context monitor read them.

/// What happened to a delivered event; the strings are the reference's `action` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Spool,
    Tmux,
    Zellij,
    SpoolUnmapped,
    SpoolBusy,
    SpoolCooldown,
    SpoolMuxFailed,
    /// Beyond the reference: the mapped pane no longer runs the session; nothing was typed.
    SpoolStalePane,
}

impl Action {
    pub const ALL: [Action; 8] = [
        Action::Spool,
        Action::Tmux,
        Action::Zellij,
        Action::SpoolUnmapped,
        Action::SpoolBusy,
        Action::SpoolCooldown,
        Action::SpoolMuxFailed,
        Action::SpoolStalePane,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Spool => "spool",
            Action::Tmux => "tmux",
            Action::Zellij => "zellij",
            Action::SpoolUnmapped => "spool-unmapped",
            Action::SpoolBusy => "spool-busy",
            Action::SpoolCooldown => "spool-cooldown",
            Action::SpoolMuxFailed => "spool-mux-failed",
            Action::SpoolStalePane => "spool-stale-pane",
        }
    }

    pub fn parse(s: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.as_str() == s)
    }

    /// Whether keystrokes reached the pane.
    pub fn woke(self) -> bool {
        matches!(self, Action::Tmux | Action::Zellij)
    }

    /// Whether a bus event answered so is owed a wake: its pane is known but the wake was not
    /// typed and submitted (a turn running, a draft or menu at the prompt, the cooldown, a
    /// failure). Not `spool` (the spool backend never types) nor `spool-unmapped` (no pane
    /// here; the events of other machines' sessions arrive so).
    pub fn owes(self) -> bool {
        matches!(
            self,
            Action::SpoolBusy
                | Action::SpoolCooldown
                | Action::SpoolMuxFailed
                | Action::SpoolStalePane
        )
    }
}
