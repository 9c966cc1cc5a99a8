//! Telling a session its due context warning: through the gate (its inbox at once, between tool
//! calls; else typed at its idle moment), a ledger row per refusal streak, the level settled
//! once it went in, a human told of the checkpoint and, with `[rewind] auto`, a rewind asked for.
//! When one is due is `session::decide`'s.

use tokio::time::Instant;

use super::{Keeper, OWED_RETRY, Shown, typed_records};
use crate::api::SessionState;
use crate::clock;
use crate::context::thresholds::Level;
use crate::mux::KeystrokeText;
use crate::session::gate::Mode;
use crate::session::io::SessionIo;
use crate::session::state::Attempt;
use crate::store::{DeliverySource, Record, RewindWhy};
use crate::telemetry::notice::{Notice, NoticeKind};
use crate::wire::session_id::short;

impl<I: SessionIo> Keeper<I> {
    pub(super) async fn warn(&mut self, sid: &str, level: Level, text: &str) -> Shown {
        let before = self.session(sid, |s| s.shown.clone());
        // Every level's template was checked to type at start-up; only digits are put in.
        let Ok(text) = KeystrokeText::new(text) else {
            return (
                before.0,
                format!("the {} warning cannot be typed", level.name),
            );
        };
        let outcome = self.tell(sid, &text, Mode::Gated).await;
        let done_ms = self.io.now_ms();
        let told = outcome.action.woke();
        let context = DeliverySource::Context;
        let mut records = Vec::new();
        if self.session(sid, |s| s.row_due(Attempt::Warn, outcome.action)) {
            records = typed_records(context, context.as_str(), sid, done_ms, &outcome);
        }
        let action = outcome.action.as_str();
        if !told {
            tracing::debug!(
                session_id = sid,
                level = level.name.as_str(),
                action,
                "context warning not told; tried again shortly"
            );
            self.session(sid, |s| {
                s.retry_in(Attempt::Warn, Instant::now(), OWED_RETRY);
            });
            self.io.record(records).await;
            return (
                before.0,
                format!("{} warning not told ({action})", level.name),
            );
        }
        self.session(sid, |s| {
            s.context.thresholds.delivered(&level);
            s.context.warned(&level.name);
        });
        let top = self.config.context.thresholds.levels().last() == Some(&level);
        if top {
            let past = format!("past {}%", level.percent);
            self.io
                .notify(Notice::new(sid, NoticeKind::Checkpoint, past));
            let waiting = self.session(sid, |s| s.facts.rewind.pending.is_some());
            if self.config.rewind.auto && !waiting {
                records.push(Record::RewindAsked {
                    session_id: sid.to_owned(),
                    why: RewindWhy::Auto,
                    at_ms: clock::now_ms(),
                });
            }
        }
        self.io.record(records).await;
        tracing::info!(
            session_id = sid,
            level = level.name.as_str(),
            action,
            "Context warning {} told to {}",
            level.name,
            short(sid)
        );
        let reason = format!("told the {} warning", level.name);
        (SessionState::Working, reason)
    }
}
