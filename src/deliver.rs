//! The delivery pipeline every actionable event goes through after the HTTP checks: spool the
//! line durably, then (mux backend) decide whether and how to wake the session. It owns the
//! `action` vocabulary the bus-facing answer uses.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::config::{Backend, Scope};
use crate::dedupe::{Begin, Dedupe};
use crate::event::Event;
use crate::gate::{Gate, GateOutcome, Mode};
use crate::mux::KeystrokeText;
use crate::spool::{Spool, SpoolError};
use crate::store::{Delivery, DeliverySource, Record, Store, now_unix_ms};

/// What happened to a delivered event; the strings are the reference's `action` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Spool,
    Tmux,
    Zellij,
    SpoolUnmapped,
    SpoolBusy,
    SpoolCooldown,
    SpoolMuxFailed,
    /// Beyond the reference: the mapped pane no longer runs the session; nothing was typed.
    SpoolStalePane,
}

impl Action {
    pub const ALL: [Action; 8] = [
        Action::Spool,
        Action::Tmux,
        Action::Zellij,
        Action::SpoolUnmapped,
        Action::SpoolBusy,
        Action::SpoolCooldown,
        Action::SpoolMuxFailed,
        Action::SpoolStalePane,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Spool => "spool",
            Action::Tmux => "tmux",
            Action::Zellij => "zellij",
            Action::SpoolUnmapped => "spool-unmapped",
            Action::SpoolBusy => "spool-busy",
            Action::SpoolCooldown => "spool-cooldown",
            Action::SpoolMuxFailed => "spool-mux-failed",
            Action::SpoolStalePane => "spool-stale-pane",
        }
    }

    pub fn parse(s: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.as_str() == s)
    }

    /// Whether keystrokes reached the pane.
    pub fn woke(self) -> bool {
        matches!(self, Action::Tmux | Action::Zellij)
    }
}

/// The answer for one delivered event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    pub action: Action,
    pub session_id: String,
    /// A redelivery of an event already delivered: nothing was appended or typed this time.
    pub duplicate: bool,
}

/// What became of an actionable event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Delivered(Delivered),
    /// `scope = "local"` and this machine does not know the session: nothing was touched.
    NotLocal,
}

/// Spools, wakes and records.
pub struct Deliverer {
    spool: Spool,
    backend: Backend,
    scope: Scope,
    gate: Arc<Gate>,
    store: Option<Store>,
    dedupe: Dedupe,
    first_spool_logged: AtomicBool,
}

impl Deliverer {
    pub fn new(
        spool: Spool,
        backend: Backend,
        scope: Scope,
        gate: Arc<Gate>,
        store: Option<Store>,
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

    pub fn store(&self) -> Option<&Store> {
        self.store.as_ref()
    }

    pub fn dedupe(&self) -> &Dedupe {
        &self.dedupe
    }

    /// A session this machine knows: seen by `wakebridge hook`, mapped in panes.json, or with a
    /// spool already.
    pub fn is_local(&self, sid: &str) -> bool {
        self.store
            .as_ref()
            .is_some_and(|s| s.known_session(sid).unwrap_or(false))
            || self.gate.lookup(sid).is_some()
            || self.spool.wake_dir().join(format!("{sid}.jsonl")).exists()
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
                        session_id: event.target,
                        duplicate: true,
                    }));
                }
                Begin::OriginalFailed => continue,
            }
        };
        let started = Instant::now();
        if let Err(e) = self.spool.append(&event.target, event.line.clone()).await {
            self.dedupe.finish(ticket, None);
            return Err(e);
        }
        let spool_time = started.elapsed();
        let event_id = event.event_id.as_deref().unwrap_or("-");
        if !self.first_spool_logged.swap(true, Ordering::Relaxed) {
            tracing::info!(event_id, session_id = %event.target, "Spooled event {event_id} for {} (first delivery; further spools log at debug)", short(&event.target));
        } else {
            tracing::debug!(event_id, session_id = %event.target, "spooled event");
        }
        let outcome = match self.backend {
            Backend::Spool => GateOutcome {
                action: Action::Spool,
                error_kind: None,
                inject_time: Duration::ZERO,
                target: None,
            },
            // Only the fixed prompt is ever typed: nothing from the event reaches the pane.
            Backend::Mux => {
                self.gate
                    .wake(&event.target, &KeystrokeText::wake_prompt(), Mode::Gated)
                    .await
            }
        };
        self.dedupe.finish(ticket, Some(outcome.action));
        self.record(
            DeliverySource::Hook,
            Some(&event),
            &event.target,
            &outcome,
            Some(spool_time),
        )
        .await;
        Ok(Outcome::Delivered(Delivered {
            action: outcome.action,
            session_id: event.target,
            duplicate: false,
        }))
    }

    /// A manual wake (`POST /wake`): the same gate, nothing spooled, recorded like an event.
    pub async fn manual_wake(&self, sid: &str, text: &KeystrokeText, mode: Mode) -> Delivered {
        let outcome = self.gate.wake(sid, text, mode).await;
        self.record(DeliverySource::Wake, None, sid, &outcome, None)
            .await;
        Delivered {
            action: outcome.action,
            session_id: sid.to_string(),
            duplicate: false,
        }
    }

    /// Writes the outcome to the ledger. A ledger failure is logged, never fatal: the event is
    /// already durable in its spool.
    pub async fn record(
        &self,
        source: DeliverySource,
        event: Option<&Event>,
        sid: &str,
        outcome: &GateOutcome,
        spool_time: Option<Duration>,
    ) {
        let Some(store) = &self.store else { return };
        let at_ms = now_unix_ms();
        let delivery = Delivery {
            at_ms,
            source,
            identity: event.map(|e| e.identity.clone()),
            event_id: event.and_then(|e| e.event_id.clone()),
            sender: event
                .and_then(|e| e.sender.clone())
                .unwrap_or_else(|| source.as_str().to_string()),
            target_session: sid.to_string(),
            action: outcome.action.as_str().to_string(),
            spool_us: spool_time.map(|t| t.as_micros() as u64),
            inject_us: (!outcome.inject_time.is_zero())
                .then_some(outcome.inject_time.as_micros() as u64),
            error_kind: outcome.error_kind.map(str::to_string),
        };
        // The delivery row is bookkeeping (the spool line is the durable record): it is queued
        // for the next group commit and the answer does not wait for SQLite. A wake row is
        // awaited below, because a restart must not reopen that session's cooldown.
        if let Err(e) = store.record_queued(Record::Delivery(delivery)) {
            tracing::warn!(error = %e, "could not record a delivery in the ledger");
        }
        if outcome.action.woke()
            && let Err(e) = store
                .record(Record::Wake {
                    session_id: sid.to_string(),
                    at_ms,
                })
                .await
        {
            tracing::warn!(error = %e, "could not record a wake in the ledger");
        }
    }
}

/// The first 8 characters of a session id, as the reference's log lines show it.
pub fn short(sid: &str) -> String {
    let head: String = sid.chars().take(8).collect();
    format!("{head}...")
}
