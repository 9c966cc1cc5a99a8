//! Per-session wake cooldown on the monotonic clock: reserved before typing (two concurrent
//! deliveries cannot both type) and rolled back if typing fails, only if still this attempt's.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// A granted reservation; hand it back to `roll_back` if the wake did not happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    serial: u64,
}

#[derive(Debug)]
pub struct Cooldown {
    window: Duration,
    last_wake: Mutex<HashMap<String, (Instant, u64)>>,
    next_serial: AtomicU64,
}

impl Cooldown {
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            last_wake: Mutex::new(HashMap::new()),
            next_serial: AtomicU64::new(0),
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, u64)>> {
        crate::lock(&self.last_wake)
    }

    fn stamp(&self) -> (Instant, u64) {
        let serial = self.next_serial.fetch_add(1, Ordering::Relaxed);
        (Instant::now(), serial)
    }

    /// Reserves a wake of `sid` now, or `None` while its window is open; `forced` (a forced
    /// manual wake) reserves it regardless of the window.
    pub fn reserve(&self, sid: &str, forced: bool) -> Option<Reservation> {
        let stamp = self.stamp();
        let mut map = self.map();
        map.retain(|_, (at, _)| stamp.0.duration_since(*at) < self.window);
        if !forced && map.contains_key(sid) {
            return None;
        }
        map.insert(sid.to_string(), stamp);
        Some(Reservation { serial: stamp.1 })
    }

    /// Gives a reservation back, unless a newer one has replaced it since.
    pub fn roll_back(&self, sid: &str, reservation: Reservation) {
        let mut map = self.map();
        if map.get(sid).map(|(_, serial)| *serial) == Some(reservation.serial) {
            map.remove(sid);
        }
    }

    /// Restores a wake that happened `ago` before now (from the ledger, after a restart).
    pub fn restore(&self, sid: &str, ago: Duration) {
        if ago < self.window {
            let (now, serial) = self.stamp();
            let at = now.checked_sub(ago).unwrap_or(now);
            self.map().insert(sid.to_string(), (at, serial));
        }
    }

    /// How long until `sid` may be woken again (zero when it may now).
    pub fn remaining(&self, sid: &str) -> Duration {
        self.map().get(sid).map_or(Duration::ZERO, |(at, _)| {
            self.window.saturating_sub(at.elapsed())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn window_is_per_session_and_exact_boundary_passes() {
        let c = Cooldown::new(Duration::from_secs(30));
        assert!(c.reserve("a", false).is_some());
        assert!(c.reserve("b", false).is_some());
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(c.reserve("a", false).is_none());
        tokio::time::advance(Duration::from_secs(20)).await;
        assert!(
            c.reserve("a", false).is_some(),
            "exactly `cooldown` later is allowed"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rollback_only_removes_its_own_reservation() {
        let c = Cooldown::new(Duration::from_secs(30));
        let first = c.reserve("a", false).expect("free");
        c.roll_back("a", first);
        let second = c.reserve("a", false).expect("rolled back, so free again");
        tokio::time::advance(Duration::from_secs(1)).await;
        c.roll_back("a", first);
        assert!(
            c.reserve("a", false).is_none(),
            "a stale rollback must not free a newer reservation"
        );
        c.roll_back("a", second);
        assert!(c.reserve("a", false).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn zero_window_never_suppresses_and_prunes() {
        let c = Cooldown::new(Duration::ZERO);
        assert!(c.reserve("a", false).is_some());
        assert!(c.reserve("a", false).is_some());
        let c = Cooldown::new(Duration::from_secs(30));
        c.reserve("t1", false);
        tokio::time::advance(Duration::from_secs(35)).await;
        c.reserve("t2", false);
        assert_eq!(c.map().len(), 1, "t1's entry was pruned");
    }

    #[tokio::test(start_paused = true)]
    async fn restored_wakes_keep_the_window_closed() {
        let c = Cooldown::new(Duration::from_secs(30));
        c.restore("a", Duration::from_secs(10));
        c.restore("b", Duration::from_secs(40));
        assert!(c.reserve("a", false).is_none());
        assert_eq!(c.remaining("a"), Duration::from_secs(20));
        assert!(c.reserve("b", false).is_some());
    }
}
