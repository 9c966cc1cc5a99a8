//! Recognising a redelivery. The bus retries a delivery it thinks failed with a byte-identical
//! body, so an event's identity is the digest of its body (`Event::identity`): it survives a bus
//! whose database was reset (ids restart from 1, timestamps do not repeat) and makes a replayed
//! signed body harmless. Identities are remembered for a window (warmed from the ledger at
//! start-up); a duplicate arriving while the original is still in flight waits for its answer.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::deliver::Action;

/// Above this many remembered identities, expired ones are swept on insert.
const SWEEP_ABOVE: usize = 65_536;

enum Seen {
    /// Being delivered now; the sender publishes the action (or `None` if it failed).
    InFlight(watch::Receiver<Option<Option<Action>>>),
    Done {
        action: Action,
        at: Instant,
    },
}

/// What `begin` found.
pub enum Begin {
    /// First time: deliver, then `finish` with the ticket.
    New(Ticket),
    /// Already delivered with this action.
    Duplicate(Action),
    /// The original failed while we waited; deliver again is the caller's choice (we say so).
    OriginalFailed,
}

/// Proof that this request owns an identity's delivery.
pub struct Ticket {
    identity: String,
    done: watch::Sender<Option<Option<Action>>>,
}

pub struct Dedupe {
    window: Duration,
    seen: Mutex<HashMap<String, Seen>>,
}

impl Dedupe {
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            seen: Mutex::new(HashMap::new()),
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Seen>> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remembers an identity delivered `ago` before now (from the ledger).
    pub fn restore(&self, identity: String, action: Action, ago: Duration) {
        if ago < self.window {
            let at = Instant::now().checked_sub(ago).unwrap_or_else(Instant::now);
            self.map().insert(identity, Seen::Done { action, at });
        }
    }

    pub async fn begin(&self, identity: &str) -> Begin {
        let mut waiting = {
            let mut map = self.map();
            let now = Instant::now();
            if map.len() > SWEEP_ABOVE {
                map.retain(|_, s| !matches!(s, Seen::Done { at, .. } if now.duration_since(*at) >= self.window));
            }
            match map.get(identity) {
                Some(Seen::Done { action, at }) if now.duration_since(*at) < self.window => {
                    return Begin::Duplicate(*action);
                }
                Some(Seen::InFlight(rx)) => rx.clone(),
                _ => {
                    let (done, rx) = watch::channel(None);
                    map.insert(identity.to_string(), Seen::InFlight(rx));
                    return Begin::New(Ticket {
                        identity: identity.to_string(),
                        done,
                    });
                }
            }
        };
        match waiting.wait_for(Option::is_some).await {
            Ok(result) => match *result {
                Some(Some(action)) => Begin::Duplicate(action),
                _ => Begin::OriginalFailed,
            },
            Err(_) => Begin::OriginalFailed,
        }
    }

    /// Records the outcome: an action is remembered; `None` (the delivery failed, the bus will
    /// retry) forgets the identity so the retry is delivered afresh.
    pub fn finish(&self, ticket: Ticket, action: Option<Action>) {
        let mut map = self.map();
        match action {
            Some(action) => {
                map.insert(
                    ticket.identity,
                    Seen::Done {
                        action,
                        at: Instant::now(),
                    },
                );
            }
            None => {
                map.remove(&ticket.identity);
            }
        }
        let _ = ticket.done.send(Some(action));
    }

    /// Forgets identities older than the window.
    pub fn expire(&self) {
        let now = Instant::now();
        self.map().retain(
            |_, s| !matches!(s, Seen::Done { at, .. } if now.duration_since(*at) >= self.window),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn remembers_for_the_window_only() {
        let d = Dedupe::new(Duration::from_secs(60));
        let Begin::New(t) = d.begin("a").await else {
            panic!("first is new")
        };
        d.finish(t, Some(Action::Tmux));
        assert!(matches!(d.begin("a").await, Begin::Duplicate(Action::Tmux)));
        tokio::time::advance(Duration::from_secs(61)).await;
        assert!(matches!(d.begin("a").await, Begin::New(_)));
    }

    #[tokio::test(start_paused = true)]
    async fn failure_forgets_so_the_retry_is_new() {
        let d = Dedupe::new(Duration::from_secs(60));
        let Begin::New(t) = d.begin("a").await else {
            panic!("first is new")
        };
        d.finish(t, None);
        assert!(matches!(d.begin("a").await, Begin::New(_)));
    }

    #[tokio::test]
    async fn concurrent_duplicate_waits_for_the_original() {
        let d = std::sync::Arc::new(Dedupe::new(Duration::from_secs(60)));
        let Begin::New(t) = d.begin("a").await else {
            panic!("first is new")
        };
        let d2 = d.clone();
        let waiter = tokio::spawn(async move {
            matches!(d2.begin("a").await, Begin::Duplicate(Action::SpoolBusy))
        });
        tokio::task::yield_now().await;
        d.finish(t, Some(Action::SpoolBusy));
        assert!(waiter.await.expect("join"));
    }

    #[tokio::test(start_paused = true)]
    async fn restored_identities_count() {
        let d = Dedupe::new(Duration::from_secs(60));
        d.restore("old".into(), Action::Spool, Duration::from_secs(120));
        d.restore("recent".into(), Action::Zellij, Duration::from_secs(10));
        assert!(matches!(d.begin("old").await, Begin::New(_)));
        assert!(matches!(
            d.begin("recent").await,
            Begin::Duplicate(Action::Zellij)
        ));
    }
}
