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
pub mod view;

pub use table::Sessions;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use std::path::PathBuf;

use crate::api::SessionStatus;
use crate::budget::policy::BudgetError;
use crate::config::{LimitSettings, RewindSettings, Settings};
use crate::context::{ContextConfig, ContextError};
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

#[derive(Debug, thiserror::Error)]
pub enum SessionConfigError {
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
    #[error(
        "nudger.keep = {0:?} names no rule; use \"all\" (every session) or \"agents\" \
         (WAKEBRIDGE_NUDGER__KEEP)"
    )]
    BadKeep(String),
    #[error(transparent)]
    Rewind(#[from] RewindError),
    #[error(transparent)]
    Context(#[from] ContextError),
    #[error(transparent)]
    Hours(#[from] hours::HoursError),
    #[error(transparent)]
    Budget(#[from] BudgetError),
}

/// Which sessions wakebridge keeps working on its own (`[nudger] keep`); the others it only
/// watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::EnumString, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
pub enum Keep {
    /// Every session its hooks report.
    All,
    /// Those launched by wakebridge or opted in (`WAKEBRIDGE=keep`), or told something by the
    /// bus or `wakebridge wake`.
    Agents,
}

/// Everything the session loop runs with, validated: `[nudger]`, `[wake] owed_after`,
/// `[limits]`, `[rewind]`, `[schedule]`, `[budget]` and `[context]`.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Nudges on (owed wakes, warnings and resumes go either way).
    pub enabled: bool,
    pub idle_after: Duration,
    /// The loop's one interval: the smaller of `[nudger]`'s and, while context is followed,
    /// `[context]`'s (changes to transcripts and feeds wake it sooner).
    pub poll_interval: Duration,
    pub schedule: Schedule,
    pub keep: Keep,
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
    /// `[context]`: each session's context followed, and its warnings.
    pub context: ContextConfig,
    /// The mux backend: things are typed or sent. With the spool backend every session is only
    /// watched.
    pub can_type: bool,
}

impl SessionConfig {
    /// Validates every section the loop reads; `state_dir` and `homes` are where the state
    /// files and feeds are kept and the transcripts found.
    pub fn from_settings(
        s: &Settings,
        state_dir: PathBuf,
        homes: Vec<PathBuf>,
        can_type: bool,
    ) -> Result<Self, SessionConfigError> {
        let context = ContextConfig::from_settings(&s.context, state_dir, homes, can_type)?;
        let nudger = &s.nudger;
        if nudger.messages.is_empty() {
            return Err(SessionConfigError::NoMessages);
        }
        let messages = (nudger.messages.iter().enumerate())
            .map(|(index, text)| {
                KeystrokeText::new(text)
                    .map_err(|source| SessionConfigError::BadMessage { index, source })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if nudger.poll_interval < MIN_POLL_INTERVAL {
            return Err(SessionConfigError::PollTooShort {
                got: nudger.poll_interval,
            });
        }
        if nudger.base_cooldown.is_zero() {
            return Err(SessionConfigError::ZeroBase);
        }
        if s.limits.max_tries == 0 {
            return Err(SessionConfigError::NoTries);
        }
        let keep =
            (nudger.keep.parse()).map_err(|_| SessionConfigError::BadKeep(nudger.keep.clone()))?;
        let resume_message = KeystrokeText::resume(&s.limits.resume_message)
            .map_err(SessionConfigError::BadResumeMessage)?;
        let poll_interval = match context.enabled {
            true => nudger.poll_interval.min(context.poll_interval),
            false => nudger.poll_interval,
        };
        Ok(Self {
            enabled: nudger.enabled,
            idle_after: nudger.idle_after,
            poll_interval,
            schedule: Schedule {
                base: nudger.base_cooldown,
                max: nudger.max_cooldown,
                acknowledge_after: nudger.acknowledge_after,
            },
            keep,
            messages,
            echo_grace: ECHO_GRACE,
            owed_after: s.wake.owed_after,
            limits: s.limits.clone(),
            resume_message,
            rewind: s.rewind.clone(),
            rewind_message: crate::rewind::message(&s.rewind)?,
            hours: hours::ActiveHours::parse(&s.schedule.active_hours, &s.schedule.active_days)?,
            budget: crate::budget::policy::validate(&s.budget)?,
            texts: crate::budget::caused::Texts::new(s),
            context,
            can_type,
        })
    }

    pub fn message(&self, unanswered: u32) -> Option<&KeystrokeText> {
        let at = usize::try_from(unanswered).unwrap_or(usize::MAX);
        self.messages.get(at.checked_rem(self.messages.len())?)
    }
}

/// Every session as the loop last rendered it (`/sessions`, `/metrics`, `wakebridge status`),
/// with the ledger version it had read then.
#[derive(Debug, Clone, Default)]
pub struct SessionViews {
    /// What they were made from (`None` before the loop's first tick).
    pub version: Option<task::Version>,
    pub sessions: Arc<BTreeMap<String, SessionStatus>>,
    /// A pause of every session, while it lasts: shown even when no session is known yet.
    pub paused_all: Option<crate::store::Pause>,
}

impl std::ops::Index<&str> for SessionViews {
    type Output = SessionStatus;

    fn index(&self, sid: &str) -> &SessionStatus {
        &self.sessions[sid]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The built-in settings with two nudge messages.
    fn settings() -> Settings {
        let mut s = crate::config::defaults().clone();
        s.nudger.messages = vec!["Please continue.".into(), "Still there?".into()];
        s
    }

    fn config(s: &Settings) -> Result<SessionConfig, SessionConfigError> {
        SessionConfig::from_settings(s, PathBuf::from("/state"), vec![], true)
    }

    #[test]
    fn defaults_load_and_the_environment_overrides_durations_and_the_message_list() {
        use crate::env::Env;
        let defaults = crate::config::load_settings(None, &Env::empty()).unwrap();
        let config = config(&defaults).unwrap();
        assert!(config.enabled && config.can_type && config.context.warnings);
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
            ("WAKEBRIDGE_CONTEXT__POLL_INTERVAL", "2s"),
        ]);
        let settings = crate::config::load_settings(None, &env).unwrap();
        let config = SessionConfig::from_settings(&settings, PathBuf::new(), vec![], false);
        let config = config.unwrap();
        assert!(!config.enabled && !config.can_type && !config.context.warnings);
        assert_eq!(config.idle_after, Duration::from_secs(600));
        assert_eq!(config.poll_interval, Duration::from_secs(2), "the smaller");
        let texts: Vec<&str> = config.messages.iter().map(KeystrokeText::as_str).collect();
        assert_eq!(texts, ["Go on.", "Keep at it."]);
    }

    #[test]
    fn valid_settings_become_a_config_and_messages_rotate() {
        let config = config(&settings()).unwrap();
        assert_eq!(config.schedule.acknowledge_after, 5);
        assert_eq!(config.message(0).unwrap().as_str(), "Please continue.");
        assert_eq!(config.message(1).unwrap().as_str(), "Still there?");
        assert_eq!(config.message(2).unwrap().as_str(), "Please continue.");
    }

    #[test]
    fn refuses_untypable_or_missing_messages_and_silly_timings() {
        let mut s = settings();
        s.nudger.messages = vec![];
        assert!(matches!(config(&s), Err(SessionConfigError::NoMessages)));
        for bad in ["1 continue", "", "line\nbreak", "-x", "ends;"] {
            let mut s = settings();
            s.nudger.messages = vec!["fine".into(), bad.into()];
            assert!(
                matches!(
                    config(&s),
                    Err(SessionConfigError::BadMessage { index: 1, .. })
                ),
                "{bad:?}"
            );
        }
        let mut s = settings();
        s.nudger.poll_interval = Duration::from_millis(5);
        assert!(matches!(
            config(&s),
            Err(SessionConfigError::PollTooShort { .. })
        ));
        let mut s = settings();
        s.nudger.base_cooldown = Duration::ZERO;
        assert!(matches!(config(&s), Err(SessionConfigError::ZeroBase)));
        let mut s = settings();
        s.schedule.active_days = vec![];
        assert!(matches!(config(&s), Err(SessionConfigError::Hours(_))));
        let mut s = settings();
        s.nudger.keep = "some".into();
        let refused = config(&s).unwrap_err().to_string();
        assert!(refused.contains("\"all\" (every session)"), "{refused}");
        s.nudger.keep = "agents".into();
        assert_eq!(config(&s).unwrap().keep, Keep::Agents);
    }
}
