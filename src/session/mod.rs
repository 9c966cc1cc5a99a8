//! The session as the unit of everything wakebridge does on its own: nudge, pay what is owed,
//! hold and resume at a usage limit, rewind, restart. Each session has one value
//! ([`state::Session`]), one pure decision turns it and what a poll saw into the next step
//! ([`decide::decide`]), and one loop ([`task`]) performs the steps through the wake gate. Only
//! `task` runs processes or types.

pub(crate) mod cooldown;
pub mod decide;
pub mod gate;
pub mod hours;
pub(crate) mod io;
pub mod observe;
pub(crate) mod schedule;
pub mod state;
mod table;
pub mod task;

pub use table::Sessions;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::api::SessionState;
use crate::config::{LimitSettings, NudgerSettings, RewindSettings, WakeSettings};
use crate::mux::{KeystrokeText, TextError};
use crate::rewind::RewindError;

pub use observe::{Movement, Observation, Verdict};
pub use schedule::{Next, NudgeCount, Schedule};

/// How long after wakebridge's own typing the session's movements are the echo of it (the text
/// showing, `UserPromptSubmit`, a one-line acknowledgement) rather than an answer. Real work
/// outlasts it; an agent that only says "nothing left" does not reset the backoff.
pub const ECHO_GRACE: Duration = Duration::from_secs(10);

/// Shortest poll interval accepted: each poll forks one `tmux list-panes`.
pub const MIN_POLL_INTERVAL: Duration = Duration::from_millis(100);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NudgeError {
    #[error("nudger.messages is empty; give at least one message to type as a nudge")]
    NoMessages,
    #[error("nudger.messages[{index}] cannot be typed: {source}")]
    BadMessage { index: usize, source: TextError },
    #[error(
        "nudger.poll_interval {got:?} is too short; use at least {MIN_POLL_INTERVAL:?} \
         (WAKEBRIDGE_NUDGER__POLL_INTERVAL)"
    )]
    PollTooShort { got: Duration },
    #[error("nudger.base_cooldown must be more than zero (WAKEBRIDGE_NUDGER__BASE_COOLDOWN)")]
    ZeroBase,
    #[error("limits.resume_message cannot be typed: {0} (WAKEBRIDGE_LIMITS__RESUME_MESSAGE)")]
    BadResumeMessage(TextError),
    #[error("limits.max_tries must be at least 1 (WAKEBRIDGE_LIMITS__MAX_TRIES)")]
    NoTries,
    #[error(transparent)]
    Rewind(#[from] RewindError),
}

/// `[nudger]` (and `[wake] owed_after`), validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NudgerConfig {
    /// Owed wakes are paid either way.
    pub enabled: bool,
    pub idle_after: Duration,
    pub poll_interval: Duration,
    pub schedule: Schedule,
    /// Typed in rotation: the n-th unanswered nudge of a series types `messages[n % len]`.
    pub messages: Vec<KeystrokeText>,
    pub echo_grace: Duration,
    pub owed_after: Duration,
    /// `[limits]`: the hold and the resume at a usage limit's reset (`max_tries` at least 1).
    pub limits: LimitSettings,
    /// `[limits] resume_message`, typable.
    pub resume_message: KeystrokeText,
    pub rewind: RewindSettings,
    /// `[rewind] message`, typable: the re-hydration prompt typed into the fresh context.
    pub rewind_message: KeystrokeText,
    /// `[schedule]`: when nudges, resumes and automatic rewinds may start.
    pub hours: hours::ActiveHours,
    /// `[budget]`: budget nudges, and no nudges while a window is nearly spent.
    pub budget: crate::config::BudgetSettings,
    /// wakebridge's texts, to charge the turns they started.
    pub texts: crate::budget::caused::Texts,
}

impl NudgerConfig {
    pub fn from_settings(
        settings: &NudgerSettings,
        wake: &WakeSettings,
        limits: &LimitSettings,
        rewind: &RewindSettings,
    ) -> Result<Self, NudgeError> {
        if settings.messages.is_empty() {
            return Err(NudgeError::NoMessages);
        }
        let messages = settings
            .messages
            .iter()
            .enumerate()
            .map(|(index, text)| {
                KeystrokeText::new(text).map_err(|source| NudgeError::BadMessage { index, source })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if settings.poll_interval < MIN_POLL_INTERVAL {
            return Err(NudgeError::PollTooShort {
                got: settings.poll_interval,
            });
        }
        if settings.base_cooldown.is_zero() {
            return Err(NudgeError::ZeroBase);
        }
        if limits.max_tries == 0 {
            return Err(NudgeError::NoTries);
        }
        let resume_message =
            KeystrokeText::resume(&limits.resume_message).map_err(NudgeError::BadResumeMessage)?;
        Ok(Self {
            enabled: settings.enabled,
            idle_after: settings.idle_after,
            poll_interval: settings.poll_interval,
            schedule: Schedule {
                base: settings.base_cooldown,
                max: settings.max_cooldown,
                acknowledge_after: settings.acknowledge_after,
            },
            messages,
            echo_grace: ECHO_GRACE,
            owed_after: wake.owed_after,
            limits: limits.clone(),
            resume_message,
            rewind: rewind.clone(),
            rewind_message: crate::rewind::message(rewind)?,
            hours: hours::ActiveHours::default(),
            budget: crate::config::BudgetSettings::default(),
            texts: crate::budget::caused::Texts::default(),
        })
    }

    pub fn message(&self, unanswered: u32) -> Option<&KeystrokeText> {
        let at = usize::try_from(unanswered).unwrap_or(usize::MAX);
        self.messages.get(at.checked_rem(self.messages.len())?)
    }
}

/// What the loop last made of one session, for `/sessions`, `wakebridge status` and `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionView {
    pub state: SessionState,
    /// In a few words for a person (`busy (title: busy glyph)`, `nudged`, ...).
    pub reason: String,
    pub unanswered: u32,
    pub last_nudge_ms: Option<i64>,
    /// Earliest time (unix ms) the next nudge may be typed; `None` when none is scheduled.
    pub next_nudge_at_ms: Option<i64>,
    pub acknowledged: bool,
    /// Since when nothing moved (unix ms), while it looks idle.
    pub idle_since_ms: Option<i64>,
}

/// Every watched session's view, replaced as a whole after each poll (cheap to clone).
pub type SessionViews = Arc<BTreeMap<String, SessionView>>;

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> NudgerSettings {
        NudgerSettings {
            enabled: true,
            idle_after: Duration::from_secs(300),
            poll_interval: Duration::from_secs(10),
            base_cooldown: Duration::from_secs(90),
            max_cooldown: Duration::from_secs(900),
            acknowledge_after: 5,
            messages: vec!["Please continue.".into(), "Still there?".into()],
        }
    }

    fn wake() -> WakeSettings {
        crate::config::defaults().wake.clone()
    }

    fn limits() -> LimitSettings {
        crate::config::defaults().limits.clone()
    }

    fn rewind() -> RewindSettings {
        crate::config::defaults().rewind.clone()
    }

    #[test]
    fn defaults_load_and_the_environment_overrides_durations_and_the_message_list() {
        use crate::env::Env;
        let defaults = crate::config::load_settings(None, &Env::empty()).unwrap();
        let config = NudgerConfig::from_settings(
            &defaults.nudger,
            &defaults.wake,
            &defaults.limits,
            &defaults.rewind,
        )
        .unwrap();
        assert!(config.enabled);
        assert_eq!(config.idle_after, Duration::from_secs(300));
        assert_eq!(config.poll_interval, Duration::from_secs(10));
        assert_eq!(config.schedule.base, Duration::from_secs(90));
        assert_eq!(config.schedule.max, Duration::from_secs(900));
        assert_eq!(config.schedule.acknowledge_after, 5);
        assert!(config.messages.len() >= 2);
        assert_eq!(config.owed_after, Duration::from_secs(10));
        let env = Env::from_pairs([
            ("WAKEBRIDGE_NUDGER__IDLE_AFTER", "10m"),
            ("WAKEBRIDGE_NUDGER__ENABLED", "false"),
            ("WAKEBRIDGE_NUDGER__MESSAGES", "Go on.,Keep at it."),
        ]);
        let settings = crate::config::load_settings(None, &env).unwrap();
        let config = NudgerConfig::from_settings(
            &settings.nudger,
            &settings.wake,
            &settings.limits,
            &settings.rewind,
        )
        .unwrap();
        assert!(!config.enabled);
        assert_eq!(config.idle_after, Duration::from_secs(600));
        let texts: Vec<&str> = config.messages.iter().map(KeystrokeText::as_str).collect();
        assert_eq!(texts, ["Go on.", "Keep at it."]);
    }

    #[test]
    fn valid_settings_become_a_config_and_messages_rotate() {
        let config =
            NudgerConfig::from_settings(&settings(), &wake(), &limits(), &rewind()).unwrap();
        assert_eq!(config.schedule.acknowledge_after, 5);
        assert_eq!(config.message(0).unwrap().as_str(), "Please continue.");
        assert_eq!(config.message(1).unwrap().as_str(), "Still there?");
        assert_eq!(config.message(2).unwrap().as_str(), "Please continue.");
    }

    #[test]
    fn refuses_untypable_or_missing_messages_and_silly_timings() {
        let mut s = settings();
        s.messages = vec![];
        assert_eq!(
            NudgerConfig::from_settings(&s, &wake(), &limits(), &rewind()),
            Err(NudgeError::NoMessages)
        );
        for bad in ["1 continue", "", "line\nbreak", "-x", "ends;"] {
            let mut s = settings();
            s.messages = vec!["fine".into(), bad.into()];
            assert!(
                matches!(
                    NudgerConfig::from_settings(&s, &wake(), &limits(), &rewind()),
                    Err(NudgeError::BadMessage { index: 1, .. })
                ),
                "{bad:?}"
            );
        }
        let mut s = settings();
        s.poll_interval = Duration::from_millis(5);
        assert!(matches!(
            NudgerConfig::from_settings(&s, &wake(), &limits(), &rewind()),
            Err(NudgeError::PollTooShort { .. })
        ));
        let mut s = settings();
        s.base_cooldown = Duration::ZERO;
        assert_eq!(
            NudgerConfig::from_settings(&s, &wake(), &limits(), &rewind()),
            Err(NudgeError::ZeroBase)
        );
    }
}
