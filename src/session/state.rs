//! One value per session: what the loop knows between two polls (backoff, quiet clock, retry
//! clocks, the last look) and what the gate did to it (its cooldown and typing record). The
//! ledger keeps what must outlive the daemon; this keeps the rest.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use tokio::time::Instant;

use crate::api::{Action, SessionState};
use crate::context::followed::Followed;
use crate::session::cooldown::Woken;
use crate::session::io::SessionFacts;
use crate::session::observe::{Activity, FileStamp, Verdict};
use crate::session::schedule::{NudgeCount, Schedule};
use crate::store::{NudgeState, Record};
use crate::telemetry::notice::NoticeKind;

/// The kinds of text the loop types, each with its own retry clock after a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    Nudge,
    Owed,
    Resume,
    Rewind,
    Warn,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tries {
    pub retry_at: Option<Instant>,
    /// The last refused action, so a streak of refusals records one ledger row, not one per poll.
    pub refused: Option<Action>,
}

/// What the gate did to a session (a wake that goes in clears both streaks and the warnings).
#[derive(Debug, Default)]
pub struct Typing {
    /// Its last wake, or one reserved: the cooldown's clock.
    pub woken: Woken,
    /// When it was last typed into (or its inbox took a text): the loop spaces nudges by it and
    /// discounts the pane activity our own keystrokes cause.
    pub at: Option<Instant>,
    /// Wakes in a row held back by text at its prompt, a menu or copy mode.
    pub occupied: u32,
    /// Wakes in a row that failed.
    pub failed: u32,
    /// The digests of the texts its inbox took within `inbox::DUPLICATE_WINDOW`, and when.
    pub sent: Vec<(String, Instant)>,
    /// The failure kinds warned about since its last wake: each a WARN once, then debug.
    pub warned: HashSet<&'static str>,
}

/// What an answer to a nudge reset, and when (unix ms).
#[derive(Debug, Clone, Copy)]
pub struct Answered {
    pub unanswered: u32,
    pub acknowledged: bool,
    pub at_ms: i64,
}

#[derive(Debug, Default)]
pub struct Session {
    /// The loop has taken it up (its nudge series restored from the ledger).
    pub entered: bool,
    /// The state its last decision showed, and why in a few words for a person.
    pub shown: (SessionState, String),
    /// What the ledger and its files said at the loop's last look.
    pub facts: SessionFacts,
    /// The loop looked at it in its last tick: it is shown.
    pub listed: bool,
    pub typing: Typing,
    /// The usage limit (its `since_ms`) a human was told of.
    pub limit_told: Option<i64>,
    /// When a human was last told each kind of notice about it (`Gate::notify`).
    pub notified: HashMap<NoticeKind, Instant>,
    /// When the rewinds asked as this id were asked, of those performed or started: never
    /// twice, even while the ledger still shows one waiting (under the id it took next).
    pub rewinds_taken: HashSet<i64>,
    pub count: NudgeCount<Instant>,
    pub acknowledged: bool,
    pub activity: Option<Activity>,
    pub last_nudge_ms: Option<i64>,
    /// What the last look at the screen showed that stopped a nudge, while its retry clock runs.
    pub screen_block: Option<Verdict>,
    /// While held at a limit: when to look at the screen next (unix ms).
    pub limit_look_ms: Option<i64>,
    /// What the last answer to a nudge reset (unanswered, acknowledged) and when (unix ms):
    /// given back if the turn that nudge started did nothing.
    pub answered_from: Option<Answered>,
    /// Its transcript as it was when its last turn was charged.
    pub charged: Option<FileStamp>,
    /// When it left the loop (no pane mapped, no inbox reaching it), while it is away.
    pub left_at: Option<Instant>,
    /// When it was last given a budget nudge (unix ms; from the ledger when it entered the loop).
    pub last_budget_ms: Option<i64>,
    /// An owed wake failed or left its text on the prompt since the last one typed: the text may
    /// still be there, so a refusal keeps the claim on the debt until it lapses.
    pub owed_text_left: bool,
    /// Its context window as followed from its transcript and status-line feed.
    pub context: Followed,
    tries: [Tries; 5],
}

impl Session {
    /// Takes up its nudge series where the ledger left it (the loop's first look at it).
    pub fn restore(
        &mut self,
        unanswered: u32,
        last_nudge: Option<(Instant, i64)>,
        acknowledged: bool,
        schedule: &Schedule,
    ) {
        self.count = NudgeCount {
            unanswered,
            last_nudge: last_nudge.map(|(at, _)| at),
        };
        self.acknowledged = acknowledged || schedule.acknowledged(unanswered);
        self.last_nudge_ms = last_nudge.map(|(_, ms)| ms);
        self.entered = true;
    }

    /// Its nudge series as the ledger keeps it: what [`Session::restore`] takes up.
    pub fn nudge_record(&self, sid: &str) -> Record {
        Record::Nudge(NudgeState {
            session_id: sid.to_owned(),
            unanswered: self.count.unanswered,
            last_nudge_ms: self.last_nudge_ms,
            acknowledged: self.acknowledged,
        })
    }

    fn tries_mut(&mut self, attempt: Attempt) -> &mut Tries {
        &mut self.tries[attempt as usize]
    }

    pub fn waits(&self, attempt: Attempt, now: Instant) -> bool {
        self.tries[attempt as usize]
            .retry_at
            .is_some_and(|at| at > now)
    }

    pub fn retry_in(&mut self, attempt: Attempt, now: Instant, wait: Duration) {
        self.tries_mut(attempt).retry_at = Some(now + wait);
    }

    /// Whether an outcome gets a ledger row: every one that typed, and the first of a streak of
    /// refusals with the same action.
    pub fn row_due(&mut self, attempt: Attempt, action: Action) -> bool {
        let refused = (!action.woke()).then_some(action);
        let tries = self.tries_mut(attempt);
        std::mem::replace(&mut tries.refused, refused) != refused || refused.is_none()
    }

    /// How long nothing has moved (nothing observed yet: zero).
    pub fn quiet_for(&self, now_ms: i64) -> Duration {
        let since = self
            .activity
            .as_ref()
            .map_or(now_ms, Activity::quiet_since_ms);
        Duration::from_millis(u64::try_from(now_ms - since).unwrap_or(0))
    }

    /// The session showed life at `at_ms`. Returns (it had unanswered nudges, it was
    /// acknowledged).
    pub fn answered(&mut self, at_ms: i64) -> (bool, bool) {
        let unanswered = self.count.unanswered;
        let had = self.count.reset();
        let was_acknowledged = std::mem::replace(&mut self.acknowledged, false);
        if had || was_acknowledged {
            self.answered_from = Some(Answered {
                unanswered,
                acknowledged: was_acknowledged,
                at_ms,
            });
        }
        self.tries_mut(Attempt::Nudge).retry_at = None;
        self.screen_block = None;
        (had, was_acknowledged)
    }

    /// The turn a nudge started ended at `ended_ms` having called no tool: if that turn was
    /// the answer (seen no later than `within_ms` after it ended), the series goes on where it
    /// was. Returns the restored unanswered count.
    pub fn idle_answer(
        &mut self,
        ended_ms: i64,
        within_ms: i64,
        schedule: &Schedule,
    ) -> Option<u32> {
        let Answered {
            unanswered,
            acknowledged,
            at_ms,
        } = self.answered_from?;
        let nudged_before = self.last_nudge_ms.is_some_and(|n| n <= ended_ms);
        if !nudged_before || at_ms > ended_ms.saturating_add(within_ms) {
            return None;
        }
        self.answered_from = None;
        self.count.unanswered = unanswered;
        self.acknowledged = acknowledged || schedule.acknowledged(unanswered);
        Some(unanswered)
    }

    /// A nudge was typed: returns whether the session is now acknowledged idle.
    pub fn nudged(&mut self, at: Instant, at_ms: i64, schedule: &Schedule) -> bool {
        self.answered_from = None;
        self.count.nudged(at);
        self.last_nudge_ms = Some(at_ms);
        self.tries_mut(Attempt::Nudge).retry_at = None;
        self.screen_block = None;
        self.acknowledged = schedule.acknowledged(self.count.unanswered);
        self.acknowledged
    }

    pub fn unheld(&mut self) {
        self.limit_look_ms = None;
        self.tries_mut(Attempt::Resume).refused = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_answer_whose_turn_did_nothing_gives_the_series_back_once() {
        let schedule = Schedule {
            base: Duration::from_secs(90),
            max: Duration::from_secs(900),
            acknowledge_after: 3,
        };
        let mut s = Session::default();
        let now = Instant::now();
        s.nudged(now, 1_000, &schedule);
        s.nudged(now, 2_000, &schedule);
        s.answered(5_000);
        assert_eq!(s.count.unanswered, 0);
        // A turn that ended before the last nudge, or long before the answer, was not it.
        assert_eq!(s.idle_answer(1_500, 10_000, &schedule), None);
        assert_eq!(s.idle_answer(2_500, 1_000, &schedule), None);
        assert_eq!(s.idle_answer(4_000, 10_000, &schedule), Some(2));
        assert_eq!(s.count.unanswered, 2);
        assert_eq!(s.idle_answer(4_000, 10_000, &schedule), None, "once");
        // The next nudge of the series acknowledges it, as if the answer never came.
        assert!(s.nudged(now, 6_000, &schedule));
    }

    #[test]
    fn a_refusal_streak_records_one_row_and_typing_ends_it() {
        let mut s = Session::default();
        assert!(s.row_due(Attempt::Owed, Action::SpoolBusy));
        assert!(!s.row_due(Attempt::Owed, Action::SpoolBusy));
        assert!(s.row_due(Attempt::Owed, Action::SpoolCooldown));
        // Each attempt kind keeps its own streak.
        assert!(s.row_due(Attempt::Resume, Action::SpoolBusy));
        assert!(s.row_due(Attempt::Owed, Action::Tmux));
        assert!(s.row_due(Attempt::Owed, Action::Tmux));
        assert!(s.row_due(Attempt::Owed, Action::SpoolBusy));
    }

    #[tokio::test(start_paused = true)]
    async fn answering_forgets_the_series_and_nudging_counts_to_acknowledged() {
        let schedule = Schedule {
            base: Duration::from_secs(90),
            max: Duration::from_secs(900),
            acknowledge_after: 2,
        };
        let mut s = Session::default();
        let now = Instant::now();
        assert!(!s.nudged(now, 1_000, &schedule));
        assert!(s.nudged(now, 2_000, &schedule));
        assert_eq!((s.count.unanswered, s.last_nudge_ms), (2, Some(2_000)));
        s.retry_in(Attempt::Nudge, now, Duration::from_secs(5));
        assert!(s.waits(Attempt::Nudge, now));
        assert_eq!(s.answered(2_500), (true, true));
        assert!(!s.acknowledged && !s.waits(Attempt::Nudge, now));
        assert_eq!(s.answered(2_600), (false, false));
    }
}
