//! The delivery pipeline every actionable event goes through after the HTTP checks: spool the
//! line durably, then (mux backend) decide whether and how to wake the session. It owns the
//! `action` vocabulary the bus-facing answer uses.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::config::Backend;
use crate::event::Event;
use crate::gate::{Gate, Mode};
use crate::mux::KeystrokeText;
use crate::spool::{Spool, SpoolError};

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

/// Spools and wakes.
pub struct Deliverer {
    spool: Spool,
    backend: Backend,
    gate: Gate,
    first_spool_logged: AtomicBool,
}

impl Deliverer {
    pub fn new(spool: Spool, backend: Backend, gate: Gate) -> Self {
        Self {
            spool,
            backend,
            gate,
            first_spool_logged: AtomicBool::new(false),
        }
    }

    pub fn spool(&self) -> &Spool {
        &self.spool
    }

    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    pub async fn deliver(&self, event: Event) -> Result<Delivered, SpoolError> {
        self.spool.append(&event.target, event.line).await?;
        let event_id = event.event_id.as_deref().unwrap_or("-");
        if !self.first_spool_logged.swap(true, Ordering::Relaxed) {
            tracing::info!(event_id, session_id = %event.target, "Spooled event {event_id} for {} (first delivery; further spools log at debug)", short(&event.target));
        } else {
            tracing::debug!(event_id, session_id = %event.target, "spooled event");
        }
        let action = match self.backend {
            Backend::Spool => Action::Spool,
            // Only the fixed prompt is ever typed: nothing from the event reaches the pane.
            Backend::Mux => {
                let prompt = KeystrokeText::wake_prompt();
                self.gate
                    .wake(&event.target, &prompt, Mode::Gated)
                    .await
                    .action
            }
        };
        Ok(Delivered {
            action,
            session_id: event.target,
            duplicate: false,
        })
    }
}

/// The first 8 characters of a session id, as the reference's log lines show it.
pub fn short(sid: &str) -> String {
    let head: String = sid.chars().take(8).collect();
    format!("{head}...")
}
