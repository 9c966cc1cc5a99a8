//! The nudger's step for a session held at a usage limit: while the limit lasts nothing is
//! nudged or typed (the gate holds everything else) and the backoff does not advance; at the
//! reset plus `[limits] resume_grace` it resumes the session once, if it is still the agent in
//! that pane and still shows the limit: the limit menu's wait option is picked if the menu is
//! open, the resume message is typed and its submit confirmed. A session that met the limit
//! again waits for the next reset shown; after `max_tries` resumes it is given up on (held
//! until it shows life, and said so in the log and in status). While held, the screen is looked
//! at every [`LOOK_EVERY_MS`]: a notice no longer there (someone resumed it, or Claude Code did)
//! lifts the hold even where no hook reports it. A session whose own auto-continue is armed
//! (Claude Code 2.1.234+) is left to it for `[limits] auto_continue_wait` after the reset and
//! resumed only if it did not continue by then. It owns that sequence; reading notices is
//! `claude::limits`'s, typing the gate's.

use tokio::time::Instant;

use super::{Nudger, OWED_RETRY, row_due, typed_records};
use crate::claude::limits::{self, AutoContinue, WRITTEN_NOW, describe_reset};
use crate::delivery::gate::Mode;
use crate::nudge::NudgeView;
use crate::nudge::io::NudgerIo;
use crate::nudge::signals::{Observation, Verdict, classify};
use crate::store::{Limit, LimitSeen, LimitSource, Record};
use crate::telemetry::LimitResume;
use crate::telemetry::notice::{Notice, NoticeKind};

/// The `sender` of the rows of resume messages it types.
pub const RESUME_SENDER: &str = "wakebridge-resume";

/// After a resume was typed, how long before the session is judged again: long enough for the
/// turn it started to reach the API and fail again (a `StopFailure`, a new notice) or work.
pub(crate) const RESUME_SETTLE_MS: i64 = 30_000;

/// After a resume that met the limit again without a new reset time (the same one shown, or
/// none), how long before the next try: the server's reset may lag the time it showed.
pub(crate) const RESUME_AGAIN_MS: i64 = 5 * 60_000;

/// How often a held session's screen is read to see whether the notice is still its latest
/// word (one capture a minute per limited session), and how long after the limit was first
/// recorded the first look waits (the notice may be drawn after the hook that reported it).
pub(crate) const LOOK_EVERY_MS: i64 = 60_000;

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
        let reset = describe_reset(limit.resets_at_ms, now_ms, &local);
        let shown = format!("limited ({}) · {reset}", limit.kind);
        if self.limits_told.insert((sid.to_owned(), limit.since_ms)) {
            self.io.notify(Notice::new(
                sid,
                NoticeKind::UsageLimit,
                format!("{}, {reset}", limit.kind),
            ));
        }
        let config = self.config.limits.clone();
        let grace_ms = i64::try_from(config.grace.as_millis()).unwrap_or(i64::MAX);
        let due_ms = limit
            .resets_at_ms
            .filter(|_| config.resume && !limit.gave_up)
            .map(|at| at.saturating_add(grace_ms));
        let after_try = |gap: i64| {
            limit
                .last_try_ms
                .map_or(i64::MIN, |at| at.saturating_add(gap))
        };
        let (settled_ms, again_ms) = (after_try(RESUME_SETTLE_MS), after_try(RESUME_AGAIN_MS));
        let retry_at = self.sessions.get(sid).and_then(|t| t.resume_retry_at);
        if let Some(due_ms) = due_ms {
            for at in [due_ms, settled_ms, again_ms] {
                if at > now_ms {
                    self.note_resume_due(at);
                }
            }
        }
        let waiting = match due_ms {
            None => true,
            Some(due_ms) => now_ms < due_ms || now_ms < settled_ms,
        } || retry_at.is_some_and(|at| at > now);
        if waiting {
            return self.look_while_held(sid, &limit, shown, now, now_ms).await;
        }
        if let Verdict::Busy(why) = classify(obs) {
            // Claude Code's own auto-continue, or someone typed: its hooks lift the hold.
            let reason = format!("{shown}; working again ({why}), not resumed");
            return self.view(sid, now, now_ms, reason);
        }
        let Some(screen) = self.io.screen(sid).await else {
            // Without the screen there is no telling whether it still shows the limit.
            self.retry_resume_in(sid, LOOK_EVERY_MS);
            return self.view(
                sid,
                now,
                now_ms,
                format!("{shown}; screen unreadable, not resumed"),
            );
        };
        let notice = limits::on_screen(&screen);
        let menu = limits::wait_option(&screen).is_some();
        if notice.is_none() && !menu {
            return self.lift(sid, now, now_ms).await;
        }
        // Claude Code's own auto-continue is armed: it continues the session by itself shortly
        // after the reset. A resume typed now would race it (or take it over): it is given its
        // time, and the hold lifts when it fires (its `quota_auto_resume_fired` hook, the
        // notice gone); only a session it left waiting is resumed here.
        let wait_ms = i64::try_from(config.auto_continue_wait.as_millis()).unwrap_or(i64::MAX);
        if limits::auto_continue(&screen) == Some(AutoContinue::Armed)
            && let Some(until_ms) = limit.resets_at_ms.map(|at| at.saturating_add(wait_ms))
            && now_ms < until_ms
        {
            self.note_resume_due(until_ms);
            let reason = format!("{shown}; Claude Code continues it itself, watching");
            return self.view(sid, now, now_ms, reason);
        }
        // After a resume, a notice with another reset is the limit met again, written just now.
        if limit.tries > 0
            && let Some(notice) = notice
            && notice.resets.is_some()
            && notice.resets != limit.resets_text
            && notice
                .resets_at_ms(now_ms, WRITTEN_NOW, &local)
                .is_some_and(|at| at > now_ms)
        {
            let next = LimitSeen::of_notice(sid, notice, LimitSource::Screen, now_ms, true);
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
            crate::telemetry::limit_resume(LimitResume::GaveUp);
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

    /// While waiting: every [`LOOK_EVERY_MS`], whether the notice is still the screen's latest
    /// word (no hook reports a human's or Claude Code's own resume of a session without hooks).
    async fn look_while_held(
        &mut self,
        sid: &str,
        limit: &Limit,
        shown: String,
        now: Instant,
        now_ms: i64,
    ) -> NudgeView {
        let resume = self.config.limits.resume;
        let reason = match () {
            () if limit.gave_up => format!("{shown}; gave up after {} resumes", limit.tries),
            () if !resume => format!("{shown}; resume off"),
            () => shown,
        };
        let tracked = self.sessions.entry(sid.to_owned()).or_default();
        let look_at = tracked
            .limit_look_ms
            .unwrap_or(limit.since_ms.saturating_add(LOOK_EVERY_MS));
        if now_ms < look_at {
            return self.view(sid, now, now_ms, reason);
        }
        tracked.limit_look_ms = Some(now_ms.saturating_add(LOOK_EVERY_MS));
        let gone =
            self.io.screen(sid).await.is_some_and(|s| {
                limits::on_screen(&s).is_none() && limits::wait_option(&s).is_none()
            });
        if gone {
            return self.lift(sid, now, now_ms).await;
        }
        self.view(sid, now, now_ms, reason)
    }

    /// The notice is gone from the screen: the hold ends, and the nudger takes it from here.
    async fn lift(&mut self, sid: &str, now: Instant, now_ms: i64) -> NudgeView {
        tracing::info!(
            session_id = sid,
            "the usage limit is no longer on the session's screen; hold lifted"
        );
        crate::telemetry::limit_resume(LimitResume::Lifted);
        if let Some(tracked) = self.sessions.get_mut(sid) {
            tracked.limit_look_ms = None;
            tracked.resume_refused = None;
        }
        self.io
            .record(vec![Record::LimitLifted {
                session_id: sid.to_owned(),
            }])
            .await;
        self.view(sid, now, now_ms, "limit no longer shown".into())
    }

    /// Dismisses the limit menu (if open) and types the resume message. A menu that would not
    /// close counts as a try, so `max_tries` bounds the digits typed too.
    async fn resume(&mut self, sid: &str, shown: &str, menu: bool, tries: u32) -> NudgeView {
        if menu && let Err(error) = self.io.dismiss_limit_menu(sid).await {
            tracing::info!(
                session_id = sid,
                "could not dismiss the limit menu: {error}"
            );
            crate::telemetry::limit_resume(LimitResume::NotTyped);
            self.retry_resume_in(sid, RESUME_SETTLE_MS);
            let done_ms = self.io.now_ms();
            self.io
                .record(vec![Record::ResumeTried {
                    session_id: sid.to_owned(),
                    at_ms: done_ms,
                }])
                .await;
            let reason = format!("{shown}; limit menu not dismissed ({})", error.kind());
            return self.view(sid, Instant::now(), done_ms, reason);
        }
        let message = self.config.limits.message.clone();
        let outcome = self.io.wake(sid, &message, Mode::Resume).await;
        let done_ms = self.io.now_ms();
        let tracked = self.sessions.entry(sid.to_owned()).or_default();
        let mut records = Vec::new();
        if row_due(&mut tracked.resume_refused, &outcome) {
            if !outcome.action.woke() {
                crate::telemetry::limit_resume(LimitResume::NotTyped);
            }
            records = typed_records(RESUME_SENDER, sid, done_ms, &outcome);
        }
        let reason = if outcome.action.woke() {
            tracing::info!(
                session_id = sid,
                try_number = tries + 1,
                "resumed a session at its usage limit's reset"
            );
            crate::telemetry::limit_resume(LimitResume::Typed);
            self.io.notify(Notice::new(
                sid,
                NoticeKind::Resumed,
                format!("try {}", tries + 1),
            ));
            records.push(Record::ResumeTried {
                session_id: sid.to_owned(),
                at_ms: done_ms,
            });
            format!("resumed at the reset (try {})", tries + 1)
        } else {
            let action = outcome.action.as_str();
            self.retry_resume_in(sid, i64::try_from(OWED_RETRY.as_millis()).unwrap_or(0));
            format!("{shown}; resume not typed ({action})")
        };
        self.io.record(records).await;
        self.view(sid, Instant::now(), self.io.now_ms(), reason)
    }

    fn retry_resume_in(&mut self, sid: &str, ms: i64) {
        let wait = std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0));
        self.sessions
            .entry(sid.to_owned())
            .or_default()
            .resume_retry_at = Some(Instant::now() + wait);
    }

    /// Keeps the earliest resume due this poll, so the loop wakes for it.
    fn note_resume_due(&mut self, due_ms: i64) {
        self.resume_due_ms = Some(self.resume_due_ms.map_or(due_ms, |d| d.min(due_ms)));
    }
}
