//! The steps of a session held at a usage limit that type or record: the resume at the reset
//! (the limit menu's wait option picked first), lifting the hold, the limit met again, giving
//! up. When each is due is `session::decide`'s.

use tokio::time::Instant;

use super::{Keeper, OWED_RETRY, Shown, typed_records};
use crate::api::SessionState;
use crate::reading::limit::Notice;
use crate::session::decide::RESUME_SETTLE_MS;
use crate::session::gate::Mode;
use crate::session::io::SessionIo;
use crate::session::state::{Attempt, Session};
use crate::store::{DeliverySource, LimitSeen, LimitSource, Record};
use crate::telemetry::LimitResume;
use crate::telemetry::notice::{Notice as HumanNotice, NoticeKind};

/// The `sender` of the rows of resume messages it types.
pub const RESUME_SENDER: &str = "wakebridge-resume";

impl<I: SessionIo> Keeper<I> {
    pub(super) async fn lift(&mut self, sid: &str) -> Shown {
        tracing::info!(
            session_id = sid,
            "the usage limit is no longer on the session's screen; hold lifted"
        );
        crate::telemetry::limit_resume(LimitResume::Lifted);
        self.session(sid, Session::unheld);
        let session_id = sid.to_owned();
        self.io
            .record(vec![Record::LimitLifted { session_id }])
            .await;
        (SessionState::Idle, "limit no longer shown".into())
    }

    /// A resume met the limit again and the screen shows its next reset: held for that one.
    pub(super) async fn met_again(&mut self, sid: &str, notice: Notice, shown: String) -> Shown {
        let now_ms = self.io.now_ms();
        let next = LimitSeen::of_notice(sid, notice, LimitSource::Screen, now_ms, true);
        tracing::info!(
            session_id = sid,
            resets = next.resets_text.as_deref().unwrap_or("?"),
            "still at its usage limit; waiting for the next reset shown"
        );
        self.io.record(vec![Record::Limited(next)]).await;
        let reason = format!("{shown}; limit met again");
        (SessionState::Limited, reason)
    }

    pub(super) async fn give_up(&mut self, sid: &str, shown: String, tries: u32) -> Shown {
        tracing::warn!(
            session_id = sid,
            tries,
            "still at its usage limit after {tries} resumes; giving up (held until it shows life)"
        );
        crate::telemetry::limit_resume(LimitResume::GaveUp);
        let session_id = sid.to_owned();
        self.io
            .record(vec![Record::ResumeGaveUp { session_id }])
            .await;
        let reason = format!("{shown}; gave up after {tries} resumes");
        (SessionState::Limited, reason)
    }

    /// Dismisses the limit menu (if open) and types the resume message. A menu that would not
    /// close counts as a try, so `max_tries` bounds the digits typed too.
    pub(super) async fn resume(&mut self, sid: &str, shown: &str, menu: bool, tries: u32) -> Shown {
        let settle = std::time::Duration::from_millis(RESUME_SETTLE_MS.unsigned_abs());
        if menu && let Err(error) = self.io.dismiss_limit_menu(sid).await {
            tracing::info!(
                session_id = sid,
                "could not dismiss the limit menu: {error}"
            );
            crate::telemetry::limit_resume(LimitResume::NotTyped);
            self.session(sid, |s| s.retry_in(Attempt::Resume, Instant::now(), settle));
            let tried = Record::ResumeTried {
                session_id: sid.to_owned(),
                at_ms: self.io.now_ms(),
            };
            self.io.record(vec![tried]).await;
            let reason = format!("{shown}; limit menu not dismissed ({})", error.kind());
            return (SessionState::Limited, reason);
        }
        let message = self.config.resume_message.clone();
        let outcome = self.tell(sid, &message, Mode::Resume).await;
        let done_ms = self.io.now_ms();
        let mut records = Vec::new();
        if self.session(sid, |s| s.row_due(Attempt::Resume, outcome.action)) {
            if !outcome.action.woke() {
                crate::telemetry::limit_resume(LimitResume::NotTyped);
            }
            records = typed_records(DeliverySource::Wake, RESUME_SENDER, sid, done_ms, &outcome);
        }
        let (state, reason) = if outcome.action.woke() {
            let try_number = tries + 1;
            tracing::info!(
                session_id = sid,
                try_number,
                "resumed a session at its usage limit's reset"
            );
            crate::telemetry::limit_resume(LimitResume::Typed);
            self.io.notify(HumanNotice::new(
                sid,
                NoticeKind::Resumed,
                format!("try {try_number}"),
            ));
            records.push(Record::ResumeTried {
                session_id: sid.to_owned(),
                at_ms: done_ms,
            });
            (
                SessionState::Working,
                format!("resumed at the reset (try {try_number})"),
            )
        } else {
            self.session(sid, |s| {
                s.retry_in(Attempt::Resume, Instant::now(), OWED_RETRY);
            });
            let action = outcome.action.as_str();
            (
                SessionState::Limited,
                format!("{shown}; resume not typed ({action})"),
            )
        };
        self.io.record(records).await;
        (state, reason)
    }
}
