//! Rewinds: a clean context window before the old one runs out, when a session asks or, with
//! `[rewind] auto`, once it crossed the checkpoint and stayed idle: `/clear` is typed, the fresh
//! prompt awaited, and the re-hydration message typed once. This module owns the `[rewind]`
//! settings and the pure decisions; the session loop performs them.

pub mod restart;

use std::time::Duration;

use crate::claude::screen;
use crate::config::RewindSettings;
use crate::mux::{KeystrokeText, TextError};
use crate::store::{RewindRow, RewindWhy};

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

/// `[rewind]`, validated; its `auto` is the context monitor's (`MonitorConfig::auto_rewind`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewindConfig {
    /// Idle time after the checkpoint warning before an automatic rewind.
    pub after: Duration,
    /// Shortest time between two automatic rewinds of one session.
    pub min_gap: Duration,
    /// The re-hydration prompt typed into the fresh context.
    pub message: KeystrokeText,
}

impl RewindConfig {
    pub fn from_settings(settings: &RewindSettings) -> Result<Self, RewindError> {
        if settings.after.is_zero() {
            return Err(RewindError::ZeroAfter);
        }
        Ok(Self {
            after: settings.after,
            min_gap: settings.min_gap,
            message: KeystrokeText::new(&settings.message).map_err(RewindError::BadMessage)?,
        })
    }
}

/// What to do about a waiting rewind now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Due {
    Wait,
    Now,
    /// Drop it (an automatic rewind too soon after the last one), and why.
    Skip(String),
}

/// Whether `pending` is due for a session idle for `idle_for`: one it asked for once it has
/// settled (`settle`), an automatic one after `after` and never within `min_gap` of the last.
pub fn due(
    pending: &RewindRow,
    idle_for: Duration,
    settle: Duration,
    last_done_ms: Option<i64>,
    now_ms: i64,
    config: &RewindConfig,
) -> Due {
    let gap_ms = crate::clock::duration_ms(config.min_gap);
    let ago_ms = last_done_ms.map(|last| now_ms.saturating_sub(last));
    match (pending.why, ago_ms.filter(|&ago| ago < gap_ms)) {
        (RewindWhy::Asked | RewindWhy::Restart, _) if idle_for >= settle => Due::Now,
        (RewindWhy::Auto, Some(ago_ms)) => {
            let ago = ago_ms.max(0) / 1000;
            Due::Skip(format!(
                "the last rewind was {ago}s ago, within rewind.min_gap"
            ))
        }
        (RewindWhy::Auto, None) if idle_for >= config.after => Due::Now,
        _ => Due::Wait,
    }
}

/// Whether a screen shows Claude Code's fresh, empty prompt with nothing holding the pane.
pub fn cleared(text: &str) -> bool {
    text.lines().any(|line| screen::input(line).is_some())
        && screen::draft(text).is_none()
        && screen::modal(text).is_none()
        && !screen::turn_running(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> RewindConfig {
        RewindConfig::from_settings(&crate::config::defaults().rewind).unwrap()
    }

    fn row(why: RewindWhy) -> RewindRow {
        RewindRow {
            session_id: "s".into(),
            why,
            asked_ms: 0,
            done_ms: None,
            outcome: None,
            new_id: None,
            detail: None,
        }
    }

    #[test]
    fn the_defaults_validate_and_an_untypable_message_is_refused() {
        let c = config();
        assert!(!crate::config::defaults().rewind.auto);
        assert_eq!(c.after, Duration::from_secs(120));
        assert_eq!(c.min_gap, Duration::from_secs(1800));
        assert!(c.message.as_str().starts_with("You were rewound"));
        assert_eq!(KeystrokeText::clear().as_str(), "/clear");
        let mut s = crate::config::defaults().rewind.clone();
        s.message = "1. go".into();
        assert!(matches!(
            RewindConfig::from_settings(&s),
            Err(RewindError::BadMessage(_))
        ));
        s.message = "fine".into();
        s.after = Duration::ZERO;
        assert_eq!(RewindConfig::from_settings(&s), Err(RewindError::ZeroAfter));
    }

    #[test]
    fn asked_rewinds_wait_to_settle_and_automatic_ones_for_after_and_the_gap() {
        let c = config();
        let settle = Duration::from_secs(10);
        let asked = row(RewindWhy::Asked);
        assert_eq!(
            due(&asked, Duration::from_secs(9), settle, None, 0, &c),
            Due::Wait
        );
        assert_eq!(due(&asked, settle, settle, None, 0, &c), Due::Now);
        // An asked rewind ignores the gap: the agent knows it checkpointed.
        assert_eq!(due(&asked, settle, settle, Some(0), 1, &c), Due::Now);
        let auto = row(RewindWhy::Auto);
        let now = 10_000_000;
        assert_eq!(due(&auto, settle, settle, None, now, &c), Due::Wait);
        assert_eq!(due(&auto, c.after, settle, None, now, &c), Due::Now);
        let recent = Some(now - 60_000);
        assert!(matches!(
            due(&auto, c.after, settle, recent, now, &c),
            Due::Skip(why) if why.contains("60s ago")
        ));
        let long_ago = Some(now - 1_800_000);
        assert_eq!(due(&auto, c.after, settle, long_ago, now, &c), Due::Now);
        let restart = row(RewindWhy::Restart);
        assert_eq!(due(&restart, settle, settle, recent, now, &c), Due::Now);
        assert_eq!(
            due(&restart, Duration::ZERO, settle, None, 0, &c),
            Due::Wait
        );
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
