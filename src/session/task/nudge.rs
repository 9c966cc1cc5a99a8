//! Typing a nudge (its rows, the backoff, acknowledged idle) and an owed wake (one row per
//! refusal streak, the payment). When each is due is `session::decide`'s.

use tokio::time::Instant;

use super::{
    BUDGET_SENDER, Keeper, NUDGER_SENDER, OWED_RETRY, OWED_SENDER, Shown, typed_records, typed_row,
};
use crate::api::Action;
use crate::api::SessionState;
use crate::budget::policy::{self, Unused};
use crate::mux::{KeystrokeText, STEP_FLOOR};
use crate::session::gate::Mode;
use crate::session::io::SessionIo;
use crate::session::state::Attempt;
use crate::store::{DeliverySource, Record};
use crate::telemetry::notice::{Notice, NoticeKind};

impl<I: SessionIo> Keeper<I> {
    pub(super) async fn nudge(&mut self, sid: &str) -> Shown {
        let unanswered = (self.sessions.read(sid, |s| s.count.unanswered)).unwrap_or(0);
        let Some(text) = self.config.message(unanswered).cloned() else {
            return (SessionState::Idle, "no nudge message".into());
        };
        let outcome = self.tell(sid, &text, Mode::Gated).await;
        let done_ms = self.io.now_ms();
        let mut records = vec![typed_row(
            DeliverySource::Nudge,
            NUDGER_SENDER,
            sid,
            done_ms,
            &outcome,
        )];
        let schedule = self.config.schedule;
        if !outcome.action.woke() {
            self.io.record(records).await;
            return self.not_typed(sid, "nudge", outcome.action);
        }
        let (acknowledged, unanswered) = self.session(sid, |session| {
            let acknowledged = session.nudged(Instant::now(), done_ms, &schedule);
            records.push(session.nudge_record(sid));
            (acknowledged, session.count.unanswered)
        });
        tracing::info!(session_id = sid, unanswered, "nudged an idle session");
        if acknowledged {
            tracing::info!(
                session_id = sid,
                unanswered,
                "session acknowledged idle: no more nudges until it shows activity"
            );
            self.io.notify(Notice::new(
                sid,
                NoticeKind::AcknowledgedIdle,
                format!("{unanswered} nudges unanswered"),
            ));
        }
        self.io.record(records).await;
        let state = if acknowledged {
            SessionState::AcknowledgedIdle
        } else {
            SessionState::Nudged
        };
        (state, "nudged".into())
    }

    /// One nudge for a window near its end with much unused; refused, it is tried again after a
    /// base gap, typed, never again for that window.
    pub(super) async fn budget_nudge(&mut self, sid: &str, unused: Unused) -> Shown {
        let local = jiff::tz::TimeZone::system();
        let text = policy::nudge_text(&unused, self.io.now_ms(), &local);
        let outcome = self.tell(sid, &text, Mode::Gated).await;
        let done_ms = self.io.now_ms();
        let row = typed_row(DeliverySource::Nudge, BUDGET_SENDER, sid, done_ms, &outcome);
        self.io.record(vec![row]).await;
        let window = unused.kind.describe();
        if !outcome.action.woke() {
            return self.not_typed(sid, "budget nudge", outcome.action);
        }
        self.session(sid, |session| {
            session.last_budget_ms = Some(done_ms);
            // An answer seen before this text is not this text's answer.
            session.answered_from = None;
        });
        tracing::info!(
            session_id = sid,
            window,
            used = unused.used,
            "budget nudge: a window ends unused"
        );
        let reason = format!("budget nudge ({window} {}% used)", unused.used.round());
        (SessionState::Nudged, reason)
    }

    /// A nudge refused (busy marker, cooldown, stale pane) or failed: tried again no sooner
    /// than a base gap, so a broken pane costs one attempt per gap, not one per poll.
    fn not_typed(&mut self, sid: &str, what: &str, action: Action) -> Shown {
        let wait = self.config.schedule.base.max(STEP_FLOOR);
        self.session(sid, |s| s.retry_in(Attempt::Nudge, Instant::now(), wait));
        let action = action.as_str();
        tracing::debug!(session_id = sid, action, "{what} not typed");
        (SessionState::Idle, format!("{what} not typed ({action})"))
    }

    pub(super) async fn pay_owed(&mut self, sid: &str, mode: Mode) -> Shown {
        // The poll read the ledger a while ago, and the session's Stop hook pays its debt
        // itself: a claim right before sending, so one debt is not told twice.
        let events = match self.io.claim_owed(sid).await {
            None => return (SessionState::Owed, "owed, the ledger unreachable".into()),
            Some(0) => return (SessionState::Working, "paid by its Stop hook".into()),
            Some(events) => events,
        };
        let outcome = self.tell(sid, &KeystrokeText::wake_prompt(), mode).await;
        let done_ms = self.io.now_ms();
        let base = self.config.schedule.base;
        let (records, state, reason) = self.session(sid, |session| {
            // A wake typed always ends a refusal streak, so its rows (with the wake) are due.
            let mut records = if session.row_due(Attempt::Owed, outcome.action) {
                typed_records(DeliverySource::Wake, OWED_SENDER, sid, done_ms, &outcome)
            } else {
                Vec::new()
            };
            let (state, reason) = if outcome.action.woke() {
                session.owed_text_left = false;
                tracing::info!(
                    session_id = sid,
                    events,
                    "typed the owed wake of an idle session"
                );
                records.push(Record::Pay {
                    session_id: sid.to_owned(),
                    up_to_ms: done_ms,
                    how: crate::session::gate::paid_by(outcome.action),
                });
                (
                    SessionState::Working,
                    format!("paid an owed wake of {events} event(s)"),
                )
            } else {
                // A failure is tried again no sooner than a base gap: each try may take the whole
                // injection budget, and the loop waits for it.
                let wait = if outcome.failed() { base } else { OWED_RETRY };
                session.retry_in(Attempt::Owed, Instant::now(), wait);
                // A refusal typed nothing: the session's Stop hook need not wait for the claim to
                // lapse. After a failure or with text left on the prompt (this try's or an earlier
                // one's), the claim stands: the Stop hook telling the debt too would tell it twice.
                session.owed_text_left |= outcome.failed() || outcome.unsubmitted();
                if !session.owed_text_left {
                    records.push(Record::Unclaim {
                        session_id: sid.to_owned(),
                    });
                }
                let action = outcome.action.as_str();
                let reason = format!("owed {events} event(s), wake not typed ({action})");
                (SessionState::Owed, reason)
            };
            (records, state, reason)
        });
        self.io.record(records).await;
        (state, reason)
    }
}
