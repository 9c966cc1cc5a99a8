//! A bus event's path after the HTTP checks: scope, dedupe, spool durably, let the session's gate
//! tell it, record.

pub mod dedupe;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::api::Action;
use crate::clock;
use crate::config::{Backend, Scope};
use crate::delivery::dedupe::{Begin, Dedupe};
use crate::mux::{KeystrokeText, WAKE_PROMPT};
use crate::session::gate::{
    Gate, GateOutcome, Mode, Resolved, delivery_row, inject_us, micros, paid_by,
};
use crate::spool::{DeliveryId, Spool, SpoolError};
use crate::store::{Delivery, DeliverySource, Record, Store};
use crate::wire::event::Event;
use crate::wire::session_id::{SessionId, short};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    pub action: Action,
    pub session_id: String,
    /// A redelivery: nothing was appended or typed this time.
    pub duplicate: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Delivered(Delivered),
    /// `scope = "local"` and this machine does not know the session.
    NotLocal,
}

pub struct Deliverer {
    spool: Spool,
    backend: Backend,
    scope: Scope,
    gate: Arc<Gate>,
    store: Store,
    dedupe: Dedupe,
    first_spool_logged: AtomicBool,
}

impl Deliverer {
    pub fn new(
        spool: Spool,
        backend: Backend,
        scope: Scope,
        gate: Arc<Gate>,
        store: Store,
        dedupe: Dedupe,
    ) -> Self {
        Self {
            spool,
            backend,
            scope,
            gate,
            store,
            dedupe,
            first_spool_logged: AtomicBool::new(false),
        }
    }

    pub fn spool(&self) -> &Spool {
        &self.spool
    }

    pub fn gate(&self) -> &Arc<Gate> {
        &self.gate
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn dedupe(&self) -> &Dedupe {
        &self.dedupe
    }

    /// Seen by `wakebridge hook`, mapped in panes.json, or with a spool already.
    pub fn is_local(&self, sid: &str) -> bool {
        self.store.known_session(sid).unwrap_or(false)
            || self.gate.resolve(sid).target.is_some()
            || crate::spool::spool_path(self.spool.wake_dir(), sid).exists()
    }

    /// Delivers a bus event: once per identity, durably spooled, then woken if the gate allows.
    pub async fn deliver(&self, event: Event) -> Result<Outcome, SpoolError> {
        if self.scope == Scope::Local && !self.is_local(&event.target) {
            tracing::debug!(session_id = %event.target, "ignoring event for a session this machine does not know");
            return Ok(Outcome::NotLocal);
        }
        let ticket = loop {
            match self.dedupe.begin(&event.identity).await {
                Begin::New(ticket) => break ticket,
                Begin::Duplicate(action) => {
                    tracing::info!(session_id = %event.target, action = action.as_str(), "redelivery of an event already delivered; nothing appended or typed");
                    return Ok(Outcome::Delivered(Delivered {
                        action,
                        session_id: event.target.into(),
                        duplicate: true,
                    }));
                }
                Begin::OriginalFailed => continue,
            }
        };
        let started = Instant::now();
        // The spool keeps the bus's id; the row, what is owed and the wake go to the id the
        // session goes by now. The spool backend types nothing, so it resolves nothing.
        let resolved = match self.backend {
            Backend::Spool => Resolved {
                session_id: event.target.as_str().into(),
                target: None,
            },
            Backend::Mux => self.gate.resolve(&event.target),
        };
        // Recorded with the line in one commit, so a spooled line always has its identity in
        // the ledger; the action is provisional until the gate answers.
        let row = delivery_row(
            DeliverySource::Hook,
            Some(&event),
            &resolved.session_id,
            Action::Spool,
        );
        let appended = (self.spool).append(&event.target, event.line.clone(), row.clone());
        let delivery_id = match appended.await {
            Ok(id) => id,
            Err(e) => {
                self.dedupe.finish(ticket, None);
                return Err(e);
            }
        };
        let spool_time = started.elapsed();
        let event_id = event.event_id.as_deref().unwrap_or("-");
        if !self.first_spool_logged.swap(true, Ordering::Relaxed) {
            tracing::info!(event_id, session_id = %event.target, "Spooled event {event_id} for {} (first delivery; further spools log at debug)", short(&event.target));
        } else {
            tracing::debug!(event_id, session_id = %event.target, "spooled event");
        }
        let outcome = match self.backend {
            Backend::Spool => GateOutcome::skipped(Action::Spool),
            // Only the fixed prompt is ever typed: nothing from the event reaches the pane.
            Backend::Mux => {
                self.gate
                    .wake_resolved(&resolved, &KeystrokeText::wake_prompt(), Mode::Gated)
                    .await
            }
        };
        self.record_outcome(delivery_id, row, &outcome, spool_time)
            .await;
        if outcome.action.owes() {
            self.gate.sessions().look_again();
        }
        self.dedupe.finish(ticket, Some(outcome.action));
        Ok(Outcome::Delivered(Delivered {
            action: outcome.action,
            session_id: event.target.into(),
            duplicate: false,
        }))
    }

    /// A manual wake (`POST /wake`): the same gate, nothing spooled, recorded like an event.
    /// The wake prompt, typed and submitted, pays what the session is owed.
    pub async fn manual_wake(
        &self,
        sid: &SessionId,
        text: &KeystrokeText,
        mode: Mode,
    ) -> Delivered {
        let resolved = self.gate.resolve(sid);
        let outcome = self.gate.wake_resolved(&resolved, text, mode).await;
        let sid: &str = &resolved.session_id;
        let row = delivery_row(DeliverySource::Wake, None, sid, outcome.action);
        let pays = text.as_str() == WAKE_PROMPT;
        self.record_row(settled(row, &outcome, None), &outcome, pays)
            .await;
        Delivered {
            action: outcome.action,
            session_id: sid.to_string(),
            duplicate: false,
        }
    }

    /// Records the gate's answer for a delivery whose row went in with its spool line (the bus's
    /// answer waits, so a redelivery after a crash gets the same); without a row, the whole row.
    async fn record_outcome(
        &self,
        delivery_id: DeliveryId,
        row: Delivery,
        outcome: &GateOutcome,
        spool_time: Duration,
    ) {
        let row = settled(row, outcome, Some(spool_time));
        let Some(delivery_id) = delivery_id else {
            return self.record_row(row, outcome, true).await;
        };
        if outcome.action == Action::Spool {
            return;
        }
        let mut records = woke(&row.target_session, outcome, true);
        records.insert(0, Record::Outcome { delivery_id, row });
        if let Err(e) = self.store.record_all(records).await {
            tracing::warn!(error = %e, "could not record a delivery's outcome in the ledger");
        }
    }

    pub async fn record(&self, source: DeliverySource, sid: &str, outcome: &GateOutcome) {
        let row = delivery_row(source, None, sid, outcome.action);
        self.record_row(settled(row, outcome, None), outcome, false)
            .await;
    }

    /// Writes an outcome that has no row yet. The delivery row is queued without waiting; a wake
    /// (and, if it `pays`, its payment) is awaited, because a restart must not reopen that
    /// session's cooldown.
    async fn record_row(&self, row: Delivery, outcome: &GateOutcome, pays: bool) {
        let awaited = woke(&row.target_session, outcome, pays);
        if let Err(e) = self.store.record_queued(Record::Delivery(row)) {
            tracing::warn!(error = %e, "could not record a delivery in the ledger");
        }
        if !awaited.is_empty()
            && let Err(e) = self.store.record_all(awaited).await
        {
            tracing::warn!(error = %e, "could not record a wake in the ledger");
        }
    }
}

/// `row` with the gate's answer: its action, timings and error kind, and whether a wake owes it
/// (only a bus event can be owed).
fn settled(mut row: Delivery, outcome: &GateOutcome, spool_time: Option<Duration>) -> Delivery {
    row.action = outcome.action.as_str().to_string();
    row.spool_us = spool_time.map(micros);
    row.inject_us = inject_us(outcome);
    row.error_kind = outcome.error_kind.map(str::to_string);
    row.owed = row.source == DeliverySource::Hook && outcome.action.owes();
    row
}

/// A wake typed and submitted, or taken by the inbox: its row and, if it `pays`, the payment of
/// everything its session was owed (the agent reads the bus). Nothing for any other outcome.
fn woke(sid: &str, outcome: &GateOutcome, pays: bool) -> Vec<Record> {
    if !outcome.action.woke() {
        return Vec::new();
    }
    let (session_id, at_ms) = (sid.to_string(), clock::now_ms());
    let paid = pays.then(|| Record::Pay {
        session_id: session_id.clone(),
        up_to_ms: at_ms,
        how: paid_by(outcome.action),
    });
    std::iter::once(Record::Wake { session_id, at_ms })
        .chain(paid)
        .collect()
}
