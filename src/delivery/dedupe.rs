//! Recognising a redelivery: an event's identity (the digest of its body) is remembered for the
//! identity window, and a duplicate arriving while the original is in flight waits for its
//! answer. At the memory's cap the oldest sixteenth is forgotten at once, with a warning.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use sha2::{Digest, Sha256};

use crate::api::Action;
use crate::telemetry::warn::Warnings;
use crate::warn_limited;

/// Most identities remembered at once: a default window of a steady 10 events/s (real traffic is
/// a few a minute). 7/8 of 2^20 is the most std's map keeps in 2^20 slots (~25 MiB); the
/// tombstones forgetting leaves can double it once, never twice (a cap of 2^20 grew to ~100 MiB).
const MAX_REMEMBERED: usize = 917_504;

/// Reaching the cap forgets this share (the oldest): finding them takes three passes over the map
/// (30–80 ms), so not on every delivery.
const EVICT_DIVISOR: usize = 16;

/// Slices of the remembered span counted to find the oldest without sorting.
const EVICT_BINS: usize = 1024;

const ACTION_BITS: u32 = 8;

const MAX_EXPIRY_MS: u64 = u64::MAX >> ACTION_BITS;

/// A remembered identity: when it expires (ms since `Dedupe::origin`) and its action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot(u64);

impl Slot {
    fn new(expires_ms: u64, action: Action) -> Self {
        Slot((expires_ms.min(MAX_EXPIRY_MS) << ACTION_BITS) | action as u64)
    }

    fn expires_ms(self) -> u64 {
        self.0 >> ACTION_BITS
    }

    fn action(self) -> Action {
        Action::from_repr((self.0 & ((1 << ACTION_BITS) - 1)) as usize).unwrap_or(Action::Spool)
    }
}

pub enum Begin {
    New(Ticket),
    Duplicate(Action),
    /// The original failed while we waited.
    OriginalFailed,
}

/// Proof that this request owns an identity's delivery.
pub struct Ticket {
    identity: Key,
    done: watch::Sender<Option<Option<Action>>>,
}

pub struct Dedupe {
    window: Duration,
    origin: Instant,
    seen: Mutex<Memory>,
    warnings: Warnings,
}

#[derive(Default)]
struct Memory {
    done: HashMap<Key, Slot>,
    /// Being delivered now; the sender publishes the action (or `None` if it failed).
    in_flight: HashMap<Key, watch::Receiver<Option<Option<Action>>>>,
}

/// An identity's first 16 raw bytes: two of a million share them with odds of ~10^-27.
type Key = [u8; 16];

fn key(identity: &str) -> Key {
    let mut raw = [0u8; 32];
    if hex::decode_to_slice(identity, &mut raw).is_err() {
        // Not a hex digest (never from `Event::identity`): digest it so it still has a key.
        raw = Sha256::digest(identity.as_bytes()).into();
    }
    raw[..16].try_into().unwrap_or_default()
}

impl Memory {
    /// Remembers `identity`; at the cap, first makes room. Returns how many live ones went.
    fn remember(&mut self, identity: Key, slot: Slot, now_ms: u64) -> usize {
        let forgotten = if self.done.len() >= MAX_REMEMBERED && !self.done.contains_key(&identity) {
            self.make_room(now_ms)
        } else {
            0
        };
        self.done.insert(identity, slot);
        forgotten
    }

    /// Drops the expired, then the oldest sixteenth. Returns how many of the oldest went.
    fn make_room(&mut self, now_ms: u64) -> usize {
        // One pass drops the expired and finds the span of the others' expiries.
        let (mut min, mut max) = (u64::MAX, 0);
        self.done.retain(|_, slot| {
            let expires = slot.expires_ms();
            let live = expires > now_ms;
            if live {
                (min, max) = (min.min(expires), max.max(expires));
            }
            live
        });
        let keep = MAX_REMEMBERED - MAX_REMEMBERED / EVICT_DIVISOR;
        let excess = self.done.len().saturating_sub(keep);
        if excess == 0 {
            return 0;
        }
        // Count the slots per slice of that span, find the slice where the oldest `excess` end,
        // then drop everything before it and as many as needed from it.
        let span = u128::from(max.saturating_sub(min)) + 1;
        let bin =
            |s: &Slot| (u128::from(s.expires_ms() - min) * EVICT_BINS as u128 / span) as usize;
        let mut counts = vec![0usize; EVICT_BINS];
        for slot in self.done.values() {
            counts[bin(slot)] += 1;
        }
        // The slices hold every slot, `excess` or more: the walk stops within them.
        let (mut cut, mut before) = (0, 0);
        while before + counts[cut] < excess {
            before += counts[cut];
            cut += 1;
        }
        let mut from_cut = excess - before;
        self.done.retain(|_, slot| match bin(slot).cmp(&cut) {
            std::cmp::Ordering::Less => false,
            std::cmp::Ordering::Equal if from_cut > 0 => {
                from_cut -= 1;
                false
            }
            _ => true,
        });
        excess
    }
}

impl Dedupe {
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            origin: Instant::now(),
            seen: Mutex::new(Memory::default()),
            warnings: Warnings::default(),
        }
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        crate::lock(&self.seen)
    }

    fn now_ms(&self) -> u64 {
        millis(self.origin.elapsed())
    }

    /// Remembers an identity delivered `ago` before now (from the ledger).
    pub fn restore(&self, identity: &str, action: Action, ago: Duration) {
        if let Some(left) = self.window.checked_sub(ago).filter(|left| !left.is_zero()) {
            let now = self.now_ms();
            let slot = Slot::new(now.saturating_add(millis(left)), action);
            let forgotten = self.memory().remember(key(identity), slot, now);
            self.warn_if_full(forgotten);
        }
    }

    pub async fn begin(&self, identity: &str) -> Begin {
        let identity = key(identity);
        let mut waiting = {
            let mut memory = self.memory();
            if let Some(slot) = memory.done.get(&identity)
                && slot.expires_ms() > self.now_ms()
            {
                return Begin::Duplicate(slot.action());
            }
            match memory.in_flight.get(&identity) {
                Some(rx) => rx.clone(),
                None => {
                    let (done, rx) = watch::channel(None);
                    memory.in_flight.insert(identity, rx);
                    return Begin::New(Ticket { identity, done });
                }
            }
        };
        match waiting.wait_for(Option::is_some).await.map(|r| *r) {
            Ok(Some(Some(action))) => Begin::Duplicate(action),
            _ => Begin::OriginalFailed,
        }
    }

    /// Records the outcome: an action is remembered for the window; `None` (the delivery
    /// failed, the bus will retry) forgets the identity so the retry is delivered afresh.
    pub fn finish(&self, ticket: Ticket, action: Option<Action>) {
        let forgotten = {
            let mut memory = self.memory();
            memory.in_flight.remove(&ticket.identity);
            match action {
                Some(action) => {
                    let now = self.now_ms();
                    let slot = Slot::new(now.saturating_add(millis(self.window)), action);
                    memory.remember(ticket.identity, slot, now)
                }
                None => 0,
            }
        };
        let _ = ticket.done.send(Some(action));
        self.warn_if_full(forgotten);
    }

    /// Forgets identities whose window has ended, and gives back the memory a flood left.
    pub fn expire(&self) {
        let now = self.now_ms();
        let mut memory = self.memory();
        let done = &mut memory.done;
        done.retain(|_, slot| slot.expires_ms() > now);
        // A quarter full at most: shrink to twice what is left (std never shrinks by itself).
        if done.capacity() > 4 * done.len().max(1024) {
            done.shrink_to(2 * done.len());
        }
    }

    /// How many identities it remembers: expired ones too, until the next sweep.
    pub fn remembered(&self) -> usize {
        self.memory().done.len()
    }

    fn warn_if_full(&self, forgotten: usize) {
        if forgotten > 0 {
            warn_limited!(
                self.warnings,
                "dedupe-full",
                forgotten,
                cap = MAX_REMEMBERED,
                "the dedupe memory is full ({MAX_REMEMBERED} event identities inside [ledger] identity_window): forgot the {forgotten} oldest, so a redelivery of one of them will be appended again; something floods /hook far beyond the bus's rate, or the window is too long for it"
            );
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
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
        tokio::time::advance(Duration::from_secs(59)).await;
        assert!(matches!(d.begin("a").await, Begin::Duplicate(Action::Tmux)));
        tokio::time::advance(Duration::from_secs(1)).await;
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

    /// The memory claim in `MAX_REMEMBERED`'s comment rests on this.
    #[test]
    fn a_slot_is_24_bytes() {
        assert_eq!(std::mem::size_of::<(Key, Slot)>(), 24);
    }

    #[test]
    fn a_slot_keeps_every_action_and_its_expiry() {
        for action in <Action as strum::IntoEnumIterator>::iter() {
            let slot = Slot::new(123_456_789, action);
            assert_eq!((slot.action(), slot.expires_ms()), (action, 123_456_789));
        }
        assert_eq!(
            Slot::new(u64::MAX, Action::Zellij).expires_ms(),
            MAX_EXPIRY_MS
        );
    }

    /// A hex digest whose key (its first 16 bytes) is `i`.
    fn hex_identity(i: usize) -> String {
        format!("{i:032x}{:032x}", 0)
    }

    /// The key of `hex_identity(i)`.
    fn numbered(i: usize) -> Key {
        (i as u128).to_be_bytes()
    }

    /// Fills `memory` up to the cap with keys `from..`, expiring at `expiry(key)`.
    fn fill(memory: &mut Memory, from: usize, expiry: impl Fn(usize) -> u64) {
        memory.done.reserve(MAX_REMEMBERED - memory.done.len());
        for i in from..from + MAX_REMEMBERED - memory.done.len() {
            memory
                .done
                .insert(numbered(i), Slot::new(expiry(i), Action::Spool));
        }
        assert_eq!(memory.done.len(), MAX_REMEMBERED);
    }

    #[tokio::test(start_paused = true)]
    async fn the_cap_forgets_the_oldest_sixteenth_at_once_and_warns() {
        let d = Dedupe::new(Duration::from_secs(3600));
        // Expiries ascending with the delivery order, as a window of real deliveries has them.
        fill(&mut d.memory(), 0, |i| 1_000_000 + i as u64);
        assert!(!d.warnings.contains("dedupe-full"));
        d.restore(&hex_identity(MAX_REMEMBERED), Action::Tmux, Duration::ZERO);
        assert!(d.warnings.contains("dedupe-full"));
        let sixteenth = MAX_REMEMBERED / EVICT_DIVISOR;
        let mut memory = d.memory();
        assert_eq!(memory.done.len(), MAX_REMEMBERED - sixteenth + 1);
        assert!(!memory.done.contains_key(&numbered(0)));
        assert!(!memory.done.contains_key(&numbered(sixteenth - 1)));
        assert!(memory.done.contains_key(&numbered(sixteenth)));
        assert_eq!(
            memory.done[&numbered(MAX_REMEMBERED)].action(),
            Action::Tmux
        );
        // Room again for a sixteenth before the next pass.
        for i in 1..sixteenth {
            let slot = Slot::new(2_000_000, Action::Spool);
            assert_eq!(memory.remember(numbered(MAX_REMEMBERED + i), slot, 0), 0);
        }
    }

    #[test]
    fn the_cap_drops_the_expired_first_and_cuts_exactly_among_equal_expiries() {
        let mut memory = Memory::default();
        // A third expired (expiry ≤ now): room without forgetting a live one.
        let now = 5_000;
        let third = MAX_REMEMBERED / 3;
        fill(&mut memory, 0, |i| if i < third { now } else { now + 1 });
        let live = Slot::new(now + 1, Action::Spool);
        assert_eq!(memory.remember(numbered(usize::MAX), live, now), 0);
        assert_eq!(memory.done.len(), MAX_REMEMBERED - third + 1);
        // Full again, every expiry the same: the sixteenth is cut from the one slice.
        fill(&mut memory, MAX_REMEMBERED, |_| now + 1);
        let sixteenth = MAX_REMEMBERED / EVICT_DIVISOR;
        assert_eq!(memory.remember(numbered(0), live, now), sixteenth);
        assert_eq!(memory.done.len(), MAX_REMEMBERED - sixteenth + 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_sweep_gives_back_what_expired() {
        let d = Dedupe::new(Duration::from_secs(60));
        for i in 0..10_000 {
            d.restore(&hex_identity(i), Action::Spool, Duration::from_secs(30));
        }
        d.restore("kept", Action::Tmux, Duration::ZERO);
        tokio::time::advance(Duration::from_secs(31)).await;
        d.expire();
        assert_eq!(d.remembered(), 1);
        assert!(d.memory().done.capacity() < 10_000);
        assert!(matches!(
            d.begin("kept").await,
            Begin::Duplicate(Action::Tmux)
        ));
    }

    #[test]
    fn hex_digests_decode_and_anything_else_is_digested() {
        let hex_id = "ab".repeat(32);
        assert_eq!(key(&hex_id), [0xab; 16]);
        assert_ne!(key("not hex"), key("not hex either"));
    }

    #[tokio::test(start_paused = true)]
    async fn restored_identities_count_for_the_rest_of_their_window() {
        let d = Dedupe::new(Duration::from_secs(60));
        d.restore("old", Action::Spool, Duration::from_secs(120));
        d.restore("edge", Action::Spool, Duration::from_secs(60));
        d.restore("recent", Action::Zellij, Duration::from_secs(10));
        assert!(matches!(d.begin("old").await, Begin::New(_)));
        assert!(matches!(d.begin("edge").await, Begin::New(_)));
        assert!(matches!(
            d.begin("recent").await,
            Begin::Duplicate(Action::Zellij)
        ));
        tokio::time::advance(Duration::from_secs(50)).await;
        assert!(matches!(d.begin("recent").await, Begin::New(_)));
    }
}
