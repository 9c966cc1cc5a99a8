//! Performing a due rewind: `/clear` through the gate (never over a turn, a draft, a dialog or
//! a limit), the fresh prompt awaited, the re-hydration message typed once into whatever id the
//! pane runs now. The new id comes from the `SessionStart` hook of `source = "clear"`, which maps
//! the pane under it; without that hook a fresh, empty prompt on the screen counts as the clear
//! done. A restart runs in the background (`rewind::restart`). Every step is in the ledger.

use std::collections::HashSet;
use std::time::Duration;

use tokio::time::Instant;

use super::{Keeper, OWED_RETRY, Shown, typed_records};
use crate::api::Action;
use crate::api::SessionState;
use crate::mux::KeystrokeText;
use crate::rewind::restart::Restart;
use crate::rewind::{self, CLEAR_WAIT, CLEARED_WITHOUT_HOOK};
use crate::session::gate::{GateOutcome, Mode};
use crate::session::io::SessionIo;
use crate::session::state::Attempt;
use crate::store::{DeliverySource, Record, RewindOutcome, RewindRow};
use crate::wakedir::target::PaneTarget;

pub const REWIND_SENDER: &str = "wakebridge-rewind";

const CLEAR_LOOK_EVERY: Duration = Duration::from_millis(200);

impl<I: SessionIo> Keeper<I> {
    /// Drops the waiting rewind (an automatic one too soon after the last), and says why.
    pub(super) async fn skip_rewind(
        &mut self,
        sid: &str,
        pending: &RewindRow,
        detail: String,
    ) -> Shown {
        tracing::info!(session_id = sid, "automatic rewind skipped: {detail}");
        self.end_rewind(pending, RewindOutcome::Skipped, None, Some(detail))
            .await;
        let reason = format!("rewind ({}) skipped", pending.why.as_str());
        (SessionState::Idle, reason)
    }

    /// Starts the restart in the background, once (`in_place`: its pane is there, alive or dead).
    pub(super) async fn begin_restart(
        &mut self,
        sid: &str,
        target: &PaneTarget,
        pending: &RewindRow,
        in_place: bool,
    ) -> Shown {
        self.take_rewind(pending);
        tracing::info!(session_id = sid, in_place, "restarting the session's agent");
        let restart = Restart {
            session_id: sid.to_owned(),
            asked_as: pending.session_id.clone(),
            pane: target.clone(),
            in_place,
            message: self.config.rewind_message.clone(),
        };
        self.io.restart(restart).await;
        (SessionState::Rewinding, "restarting".into())
    }

    /// `/clear`, the fresh prompt, the message. A session renamed since the rewind was asked
    /// for (the daemon stopped between the clear and the message, or someone cleared it by
    /// hand) only gets the message.
    pub(super) async fn clear_and_rehydrate(
        &mut self,
        sid: &str,
        target: &PaneTarget,
        pending: &RewindRow,
    ) -> Shown {
        let mut new_id = None;
        if pending.session_id == sid {
            // Whoever is on the pane now is not the id the clear gives it.
            let pane = target.to_string();
            let before: HashSet<String> = self
                .io
                .mapping()
                .await
                .into_iter()
                .filter(|(_, t)| t.to_string() == pane)
                .map(|(id, _)| id)
                .collect();
            let outcome = self.tell(sid, &KeystrokeText::clear(), Mode::Gated).await;
            self.record_typed(sid, &outcome).await;
            // Claude Code runs its SessionEnd and SessionStart hooks before it redraws the
            // prompt, so a `/clear` it took can look unsubmitted to the injector's short wait:
            // whether it was is the clear's to show.
            let unconfirmed = outcome.unsubmitted();
            if !outcome.action.woke() && !unconfirmed {
                let action = outcome.action.as_str();
                if matches!(outcome.action, Action::SpoolBusy | Action::SpoolCooldown) {
                    // A turn, a draft, a dialog or the cooldown: the next idle moment.
                    self.session(sid, |s| {
                        s.retry_in(Attempt::Rewind, Instant::now(), OWED_RETRY);
                    });
                    let reason = format!("rewind waiting (/clear not typed: {action})");
                    return (SessionState::Rewinding, reason);
                }
                let kind = outcome.error_kind.map(|k| format!(" ({k})"));
                let detail = format!("/clear not typed: {action}{}", kind.unwrap_or_default());
                return self.rewind_failed(sid, pending, detail).await;
            }
            let Some(renamed) = self.await_cleared(sid, &pane, &before).await else {
                let detail = "no fresh prompt after /clear".to_owned();
                return self.rewind_failed(sid, pending, detail).await;
            };
            new_id = renamed;
        }
        let into = new_id.unwrap_or_else(|| sid.to_owned());
        if self.rehydrate(&into).await {
            tracing::info!(
                session_id = sid,
                new_session_id = into.as_str(),
                why = pending.why.as_str(),
                "rewound a session: /clear, then the re-hydration prompt"
            );
            self.end_rewind(pending, RewindOutcome::Done, Some(into), None)
                .await;
            (
                SessionState::Working,
                format!("rewound ({})", pending.why.as_str()),
            )
        } else {
            tracing::warn!(
                session_id = sid,
                "rewound, but the re-hydration prompt could not be typed"
            );
            let detail = Some("the re-hydration prompt was not typed".to_owned());
            self.end_rewind(pending, RewindOutcome::NotTyped, Some(into), detail)
                .await;
            (SessionState::Idle, "rewound, prompt not typed".to_owned())
        }
    }

    async fn rewind_failed(&mut self, sid: &str, pending: &RewindRow, detail: String) -> Shown {
        tracing::warn!(session_id = sid, "rewind failed: {detail}");
        self.end_rewind(pending, RewindOutcome::Failed, None, Some(detail))
            .await;
        (SessionState::Idle, "rewind failed".into())
    }

    /// Waits (up to [`CLEAR_WAIT`]) for the clear to show: the pane mapped under a new id
    /// (`Some(Some(new_id))`), or, after [`CLEARED_WITHOUT_HOOK`], a fresh empty prompt
    /// (`Some(None)`). `before`: the ids mapped to `pane` before the clear.
    async fn await_cleared(
        &self,
        sid: &str,
        pane: &str,
        before: &HashSet<String>,
    ) -> Option<Option<String>> {
        let started = Instant::now();
        loop {
            tokio::time::sleep(CLEAR_LOOK_EVERY).await;
            let mapping = self.io.mapping().await;
            if let Some((new_id, _)) = mapping
                .iter()
                .find(|(id, target)| !before.contains(*id) && target.to_string() == pane)
            {
                return Some(Some(new_id.clone()));
            }
            if started.elapsed() >= CLEARED_WITHOUT_HOOK
                && mapping.contains_key(sid)
                && self
                    .io
                    .screen(sid)
                    .await
                    .is_some_and(|screen| rewind::cleared(&screen))
            {
                return Some(None);
            }
            if started.elapsed() >= CLEAR_WAIT {
                return None;
            }
        }
    }

    /// Types the re-hydration message into `sid` once (the cooldown `/clear` started is no
    /// reason to wait, nor the busy marker a clear leaves behind), retrying while the fresh
    /// screen is still being drawn; true once it was typed and submitted.
    pub(super) async fn rehydrate(&mut self, sid: &str) -> bool {
        let message = self.config.rewind_message.clone();
        let started = Instant::now();
        loop {
            let outcome = self.tell(sid, &message, Mode::Forced).await;
            let typed = outcome.action.woke();
            let again = outcome.action == Action::SpoolBusy && started.elapsed() < CLEAR_WAIT;
            if typed || !again {
                self.record_typed(sid, &outcome).await;
                return typed;
            }
            tokio::time::sleep(CLEAR_LOOK_EVERY).await;
        }
    }

    /// Records what typing `/clear` or the message did: its row, and the wake if it went in.
    async fn record_typed(&self, sid: &str, outcome: &GateOutcome) {
        let done_ms = self.io.now_ms();
        let records = typed_records(DeliverySource::Wake, REWIND_SENDER, sid, done_ms, outcome);
        self.io.record(records).await;
    }

    /// Records how the rewind ended (and remembers it as taken, should the record not go in).
    pub(super) async fn end_rewind(
        &mut self,
        pending: &RewindRow,
        outcome: RewindOutcome,
        new_id: Option<String>,
        detail: Option<String>,
    ) {
        self.take_rewind(pending);
        let at_ms = self.io.now_ms();
        self.io
            .record(vec![Record::RewindEnded {
                session_id: pending.session_id.clone(),
                outcome,
                new_id,
                detail,
                at_ms,
            }])
            .await;
    }
}
