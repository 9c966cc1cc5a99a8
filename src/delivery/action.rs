//! The `action` vocabulary: what became of a delivered event, in the reference bridge's words.

use strum::{EnumIter, EnumString, FromRepr, IntoStaticStr};

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, EnumIter, EnumString, FromRepr, IntoStaticStr,
)]
#[strum(serialize_all = "kebab-case")]
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
    /// Beyond the reference: a person paused the session (`wakebridge pause`); owed until
    /// unpaused.
    SpoolPaused,
    /// Beyond the reference: the session's own inbox took the wake (Claude Code 2.1.224+);
    /// nothing was typed, and no pane is needed.
    Inbox,
}

crate::strum_as_str!(Action);

impl Action {
    pub fn woke(self) -> bool {
        matches!(self, Action::Tmux | Action::Zellij | Action::Inbox)
    }

    /// Whether a bus event answered so is owed a wake: its pane is known but the wake was not
    /// typed. Not `spool-unmapped`: other machines' sessions arrive so.
    pub fn owes(self) -> bool {
        matches!(
            self,
            Action::SpoolBusy
                | Action::SpoolCooldown
                | Action::SpoolMuxFailed
                | Action::SpoolStalePane
                | Action::SpoolPaused
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_delivered_wake_woke_the_session() {
        // The context monitor settles a warning only on an action that woke the session.
        assert!(Action::Tmux.woke());
        assert!(Action::Zellij.woke());
        assert!(Action::Inbox.woke());
        for a in [
            Action::SpoolBusy,
            Action::SpoolCooldown,
            Action::SpoolMuxFailed,
            Action::SpoolStalePane,
            Action::SpoolUnmapped,
        ] {
            assert!(!a.woke(), "{a:?}");
        }
    }
}
