//! Recognising a redelivery. The bus retries a delivery it thinks failed with a byte-identical
//! body, so an event's identity is the digest of its body (`Event::identity`): it survives a bus
//! whose database was reset (ids restart from 1, timestamps do not repeat) and makes a replayed
//! signed body harmless. Identities are remembered for a window (warmed from the ledger at
//! start-up); a duplicate arriving while the original is still in flight waits for its answer.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use sha2::{Digest, Sha256};

use crate::delivery::action::Action;

/// Most identities remembered at once; beyond it the oldest are forgotten first. The bus retries
/// within 1.5 s (errors) or ~17 s (timeouts); 65 536 events cover that even at a flood of 3 800
/// events/s (real DM traffic is a few per minute, so the whole 24 h window fits), and memory
/// stays bounded (~10 MiB) however fast events arrive.
const MAX_REMEMBERED: usize = 65_536;

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
    identity: Key,
    done: watch::Sender<Option<Option<Action>>>,
}

pub struct Dedupe {
    window: Duration,
    seen: Mutex<Memory>,
}

/// Identities and, oldest first, when each was delivered: expiry and the cap pop from the front
/// in amortised O(1) instead of scanning the map.
#[derive(Default)]
struct Memory {
    map: HashMap<Key, Seen>,
    order: VecDeque<(Key, Instant)>,
}

/// An identity as 32 raw bytes (the hex digest decoded): no allocation per entry, a third of the
/// memory of the hex text.
type Key = [u8; 32];

fn key(identity: &str) -> Key {
    let mut raw = [0u8; 32];
    if hex::decode_to_slice(identity, &mut raw).is_err() {
        // Not a hex digest (never from `Event::identity`): digest it so it still has a key.
        raw = Sha256::digest(identity.as_bytes()).into();
    }
    raw
}

impl Memory {
    fn remember(&mut self, identity: Key, action: Action, at: Instant) {
        self.order.push_back((identity, at));
        self.map.insert(identity, Seen::Done { action, at });
    }

    /// Forgets what is older than `window`, and the oldest beyond the cap.
    fn expire(&mut self, now: Instant, window: Duration) {
        while let Some((identity, at)) = self.order.front() {
            let expired = now.duration_since(*at) >= window;
            if !expired && self.order.len() <= MAX_REMEMBERED {
                break;
            }
            // Only forget the entry this record stands for (a later delivery may have replaced it).
            if matches!(self.map.get(identity), Some(Seen::Done { at: current, .. }) if current == at)
            {
                self.map.remove(identity);
            }
            self.order.pop_front();
        }
    }
}

impl Dedupe {
    /// Most identities remembered at once (the start-up warm-up reads no more than this).
    pub const CAPACITY: usize = MAX_REMEMBERED;

    pub fn new(window: Duration) -> Self {
        Self {
            window,
            seen: Mutex::new(Memory::default()),
        }
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        crate::lock(&self.seen)
    }

    /// Remembers an identity delivered `ago` before now (from the ledger).
    pub fn restore(&self, identity: String, action: Action, ago: Duration) {
        if ago < self.window {
            let at = Instant::now().checked_sub(ago).unwrap_or_else(Instant::now);
            // Restored oldest first (the ledger's order), so `order` stays sorted.
            self.memory().remember(key(&identity), action, at);
        }
    }

    pub async fn begin(&self, identity: &str) -> Begin {
        let identity = key(identity);
        let mut waiting = {
            let mut memory = self.memory();
            let now = Instant::now();
            memory.expire(now, self.window);
            match memory.map.get(&identity) {
                Some(Seen::Done { action, at }) if now.duration_since(*at) < self.window => {
                    return Begin::Duplicate(*action);
                }
                Some(Seen::InFlight(rx)) => rx.clone(),
                _ => {
                    let (done, rx) = watch::channel(None);
                    memory.map.insert(identity, Seen::InFlight(rx));
                    return Begin::New(Ticket { identity, done });
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
        let mut memory = self.memory();
        match action {
            Some(action) => memory.remember(ticket.identity, action, Instant::now()),
            None => {
                memory.map.remove(&ticket.identity);
            }
        }
        let _ = ticket.done.send(Some(action));
    }

    /// Forgets identities older than the window.
    pub fn expire(&self) {
        self.memory().expire(Instant::now(), self.window);
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
    async fn memory_is_capped_oldest_first() {
        let d = Dedupe::new(Duration::from_secs(3600));
        for i in 0..MAX_REMEMBERED + 10 {
            let Begin::New(t) = d.begin(&format!("id-{i}")).await else {
                panic!("new")
            };
            d.finish(t, Some(Action::Spool));
        }
        d.expire();
        let memory = d.memory();
        assert_eq!(memory.map.len(), MAX_REMEMBERED);
        assert!(!memory.map.contains_key(&key("id-0")));
        assert!(
            memory
                .map
                .contains_key(&key(&format!("id-{}", MAX_REMEMBERED + 9)))
        );
    }

    #[test]
    fn hex_digests_decode_and_anything_else_is_digested() {
        let hex_id = "ab".repeat(32);
        assert_eq!(key(&hex_id), [0xab; 32]);
        assert_ne!(key("not hex"), key("not hex either"));
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
