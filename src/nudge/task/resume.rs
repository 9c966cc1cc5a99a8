//! The nudger's step for a session held at a usage limit: while the limit lasts nothing is
//! nudged or typed (the gate holds everything else) and the backoff does not advance; at the
//! reset plus `[limits] resume_grace` it resumes the session once, if it is still the agent in
//! that pane and still shows the limit: the limit menu's wait option is picked if the menu is
//! open, the resume message is typed and its submit confirmed. A session that met the limit
//! again waits for the next reset shown; after `max_tries` resumes it is given up on (held
//! until it shows life, and said so in the log and in status). It owns that sequence; reading
//! notices is `claude::limits`'s, typing the gate's.

use tokio::time::Instant;

use super::{Nudger, OWED_RETRY, typed_row};
use crate::claude::limits::{self, describe_reset};
use crate::delivery::gate::Mode;
use crate::nudge::NudgeView;
use crate::nudge::io::NudgerIo;
use crate::nudge::signals::{Observation, Verdict, classify};
use crate::store::{DeliverySource, Limit, LimitSeen, LimitSource, Record};

/// The `sender` of the rows of resume messages it types.
pub const RESUME_SENDER: &str = "wakebridge-resume";

/// After a resume was typed, how long before the session is judged again: long enough for the
/// turn it started to reach the API and fail again (a `StopFailure`, a new notice) or work.
pub(crate) const RESUME_SETTLE_MS: i64 = 30_000;

/// After a resume that met the limit again without a new reset time (the same one shown, or
/// none), how long before the next try: the server's reset may lag the time it showed.
pub(crate) const RESUME_AGAIN_MS: i64 = 5 * 60_000;

impl<I: NudgerIo> Nudger<I> {
    /// What to do about `sid`, held at `limit`: wait, resume, or give up. Always answers with the
    /// session's view: nothing else is done for a held session.
    pub(super) async fn held_at_limit(
        &mut self,
        sid: &str,
        obs: &Observation,
        limit: Limit,
        now: Instant,
        now_ms: i64,
    ) -> NudgeView {
        let local = jiff::tz::TimeZone::system();
        let shown = format!(
            "limited ({}) · {}",
            limit.kind,
            describe_reset(limit.resets_at_ms, now_ms, &local)
        );
        let config = self.config.limits.clone();
        if limit.gave_up {
            let reason = format!("{shown}; gave up after {} resumes", limit.tries);
            return self.view(sid, now, now_ms, reason);
        }
        let Some(resets_at) = limit.resets_at_ms else {
            return self.view(sid, now, now_ms, shown);
        };
        let grace_ms = i64::try_from(config.grace.as_millis()).unwrap_or(i64::MAX);
        let due_ms = resets_at.saturating_add(grace_ms);
        let after_try = |gap: i64| {
            limit
                .last_try_ms
                .map_or(i64::MIN, |at| at.saturating_add(gap))
        };
        let (settled_ms, again_ms) = (after_try(RESUME_SETTLE_MS), after_try(RESUME_AGAIN_MS));
        let settling = now_ms < settled_ms;
        let resume = config.resume;
        if resume {
            for at in [due_ms, settled_ms, again_ms] {
                if at > now_ms {
                    self.note_resume_due(at);
                }
            }
        }
        let retrying = self
            .sessions
            .get(sid)
            .and_then(|t| t.resume_retry_at)
            .is_some_and(|at| at > now);
        if now_ms < due_ms || !resume || settling || retrying {
            let reason = if resume {
                shown
            } else {
                format!("{shown}; resume off")
            };
            return self.view(sid, now, now_ms, reason);
        }
        if let Verdict::Busy(why) = classify(obs) {
            // Claude Code's own auto-continue, or someone typed: its hooks lift the hold.
            let reason = format!("{shown}; working again ({why}), not resumed");
            return self.view(sid, now, now_ms, reason);
        }
        let Some(screen) = self.io.screen(sid).await else {
            self.retry_resume_later(sid);
            return self.view(sid, now, now_ms, format!("{shown}; screen unreadable"));
        };
        let notice = limits::on_screen(&screen);
        let menu = limits::wait_option(&screen).is_some();
        if notice.is_none() && !menu {
            tracing::info!(
                session_id = sid,
                "the usage limit is no longer on the session's screen; hold lifted"
            );
            crate::telemetry::limit_resume("lifted");
            self.io
                .record(vec![Record::LimitLifted {
                    session_id: sid.to_owned(),
                }])
                .await;
            return self.view(sid, now, now_ms, "limit no longer shown".into());
        }
        if let Some(notice) = notice
            && notice.resets.is_some()
            && notice.resets != limit.resets_text
            && notice
                .resets_at_ms(now_ms, &local)
                .is_some_and(|at| at > now_ms)
        {
            // It met the limit again and says when it lifts next: wait for that.
            let next = LimitSeen::of_notice(sid, notice, LimitSource::Screen, now_ms);
            tracing::info!(
                session_id = sid,
                resets = next.resets_text.as_deref().unwrap_or("?"),
                "still at its usage limit; waiting for the next reset shown"
            );
            self.io.record(vec![Record::Limited(next)]).await;
            return self.view(sid, now, now_ms, format!("{shown}; limit met again"));
        }
        if limit.tries >= config.max_tries {
            tracing::warn!(
                session_id = sid,
                tries = limit.tries,
                "still at its usage limit after {} resumes; giving up (held until it shows life)",
                limit.tries
            );
            crate::telemetry::limit_resume("gave-up");
            self.io
                .record(vec![Record::ResumeGaveUp {
                    session_id: sid.to_owned(),
                }])
                .await;
            let reason = format!("{shown}; gave up after {} resumes", limit.tries);
            return self.view(sid, now, now_ms, reason);
        }
        if now_ms < again_ms {
            let reason = format!("{shown}; met the limit again, trying again soon");
            return self.view(sid, now, now_ms, reason);
        }
        self.resume(sid, &shown, menu, limit.tries).await
    }

    /// Dismisses the limit menu (if open) and types the resume message.
    async fn resume(&mut self, sid: &str, shown: &str, menu: bool, tries: u32) -> NudgeView {
        if menu {
            match self.io.dismiss_limit_menu(sid).await {
                Ok(_) => {}
                Err(error) => {
                    tracing::info!(
                        session_id = sid,
                        "could not dismiss the limit menu: {error}"
                    );
                    self.retry_resume_later(sid);
                    crate::telemetry::limit_resume("not-typed");
                    let reason = format!("{shown}; limit menu not dismissed ({})", error.kind());
                    return self.view(sid, Instant::now(), self.io.now_ms(), reason);
                }
            }
        }
        let message = self.config.limits.message.clone();
        let outcome = self.io.wake(sid, &message, Mode::Resume).await;
        let done_ms = self.io.now_ms();
        let mut records = vec![typed_row(
            DeliverySource::Wake,
            RESUME_SENDER,
            sid,
            done_ms,
            &outcome,
        )];
        let reason = if outcome.action.woke() {
            tracing::info!(
                session_id = sid,
                try_number = tries + 1,
                "resumed a session at its usage limit's reset"
            );
            crate::telemetry::limit_resume("typed");
            records.push(Record::ResumeTried {
                session_id: sid.to_owned(),
                at_ms: done_ms,
            });
            records.push(Record::Wake {
                session_id: sid.to_owned(),
                at_ms: done_ms,
            });
            format!("resumed at the reset (try {})", tries + 1)
        } else {
            self.retry_resume_later(sid);
            crate::telemetry::limit_resume("not-typed");
            format!("{shown}; resume not typed ({})", outcome.action.as_str())
        };
        self.io.record(records).await;
        self.view(sid, Instant::now(), self.io.now_ms(), reason)
    }

    fn retry_resume_later(&mut self, sid: &str) {
        self.sessions
            .entry(sid.to_owned())
            .or_default()
            .resume_retry_at = Some(Instant::now() + OWED_RETRY);
    }

    /// Keeps the earliest resume due this poll, so the loop wakes for it.
    fn note_resume_due(&mut self, due_ms: i64) {
        self.resume_due_ms = Some(self.resume_due_ms.map_or(due_ms, |d| d.min(due_ms)));
    }
}
