//! Rewinds: a clean context window before the old one runs out, when a session asks or, with
//! `[rewind] auto`, once it crossed the checkpoint and stayed idle: `/clear` is typed, the fresh
//! prompt awaited, and the re-hydration message typed once. This module owns the `[rewind]`
//! settings and what a cleared screen is; when a rewind is due is `session::decide`'s, and the
//! session loop performs it.

pub mod restart;

use std::time::Duration;

use crate::claude::screen;
use crate::config::RewindSettings;
use crate::mux::{KeystrokeText, TextError};

/// Longest wait after `/clear` for the fresh prompt and the hook that maps the new id (Claude
/// Code clears within a second; its SessionStart hooks may take seconds).
pub const CLEAR_WAIT: Duration = Duration::from_secs(20);

/// After `/clear`, how long a fresh-looking screen is trusted without the `SessionStart` hook
/// mapping the new id (some builds did not fire it; a session without hooks never does).
pub const CLEARED_WITHOUT_HOOK: Duration = Duration::from_secs(3);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RewindError {
    #[error("rewind.message cannot be typed: {0} (WAKEBRIDGE_REWIND__MESSAGE)")]
    BadMessage(TextError),
    #[error("rewind.after must be more than zero (WAKEBRIDGE_REWIND__AFTER)")]
    ZeroAfter,
}

/// Validates `[rewind]`: `after` above zero, and the re-hydration message typable, which it
/// returns (`auto` is read by the session loop when a warning is due).
pub fn message(settings: &RewindSettings) -> Result<KeystrokeText, RewindError> {
    if settings.after.is_zero() {
        return Err(RewindError::ZeroAfter);
    }
    KeystrokeText::new(&settings.message).map_err(RewindError::BadMessage)
}

/// Whether a screen shows Claude Code's fresh, empty prompt with nothing holding the pane.
pub fn cleared(text: &str) -> bool {
    let seen = screen::read(text);
    text.lines().any(|line| screen::input(line).is_some())
        && seen.draft.is_none()
        && seen.modal.is_none()
        && !seen.turn_running
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_validate_and_an_untypable_message_is_refused() {
        let c = crate::config::defaults().rewind.clone();
        assert!(!c.auto);
        assert_eq!(c.after, Duration::from_secs(120));
        assert_eq!(c.min_gap, Duration::from_secs(1800));
        assert!(
            message(&c)
                .unwrap()
                .as_str()
                .starts_with("You were rewound")
        );
        assert_eq!(KeystrokeText::clear().as_str(), "/clear");
        let mut s = crate::config::defaults().rewind.clone();
        s.message = "1. go".into();
        assert!(matches!(message(&s), Err(RewindError::BadMessage(_))));
        s.message = "fine".into();
        s.after = Duration::ZERO;
        assert_eq!(message(&s), Err(RewindError::ZeroAfter));
    }

    #[test]
    fn only_an_empty_prompt_that_nothing_holds_is_a_cleared_screen() {
        let fresh = " ▐▛███▜▌   Claude Code\n\n❯ /clear\n  ⎿  (no content)\n\n────\n❯ \n────\n  ? for shortcuts";
        assert!(cleared(fresh));
        assert!(!cleared("────\n❯ /clear\n────\n"));
        assert!(!cleared("no prompt at all"));
        assert!(!cleared(
            "Do you want to proceed?\n❯ 1. Yes\n  2. No\n────\n❯ \n────"
        ));
    }
}
