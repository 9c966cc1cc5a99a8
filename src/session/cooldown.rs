//! The wake cooldown on the monotonic clock: reserved before typing (two concurrent deliveries
//! cannot both type) and rolled back if typing fails, only if still this attempt's. Each
//! session's last wake is a [`Woken`] in its own value; this holds only the window.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// A session's last wake (or the reservation of one) and the reservation's serial number.
pub type Woken = Option<(Instant, u64)>;

/// A granted reservation; hand it back to `roll_back` if the wake did not happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    serial: u64,
}

#[derive(Debug)]
pub struct Cooldown {
    window: Duration,
    next_serial: AtomicU64,
}

impl Cooldown {
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            next_serial: AtomicU64::new(0),
        }
    }

    fn stamp(&self, at: Instant) -> (Instant, u64) {
        (at, self.next_serial.fetch_add(1, Ordering::Relaxed))
    }

    /// Reserves a wake now, or `None` while the window of `woken` is open; `forced` (a forced
    /// manual wake) reserves it regardless of the window.
    pub fn reserve(&self, woken: &mut Woken, forced: bool) -> Option<Reservation> {
        if !forced && !self.remaining(woken).is_zero() {
            return None;
        }
        let stamp = self.stamp(Instant::now());
        *woken = Some(stamp);
        Some(Reservation { serial: stamp.1 })
    }

    /// Gives a reservation back, unless a newer one has replaced it since.
    pub fn roll_back(woken: &mut Woken, reservation: Reservation) {
        if woken.is_some_and(|(_, serial)| serial == reservation.serial) {
            *woken = None;
        }
    }

    /// Restores a wake that happened `ago` before now (from the ledger, after a restart).
    pub fn restore(&self, woken: &mut Woken, ago: Duration) {
        if ago < self.window {
            let now = Instant::now();
            *woken = Some(self.stamp(now.checked_sub(ago).unwrap_or(now)));
        }
    }

    /// How long until the session may be woken again (zero when it may now).
    pub fn remaining(&self, woken: &Woken) -> Duration {
        woken.map_or(Duration::ZERO, |(at, _)| {
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
        let (mut a, mut b) = (None, None);
        assert!(c.reserve(&mut a, false).is_some());
        assert!(c.reserve(&mut b, false).is_some());
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(c.reserve(&mut a, false).is_none());
        tokio::time::advance(Duration::from_secs(20)).await;
        assert!(
            c.reserve(&mut a, false).is_some(),
            "exactly `cooldown` later is allowed"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rollback_only_removes_its_own_reservation() {
        let c = Cooldown::new(Duration::from_secs(30));
        let mut a = None;
        let first = c.reserve(&mut a, false).expect("free");
        Cooldown::roll_back(&mut a, first);
        let second = c
            .reserve(&mut a, false)
            .expect("rolled back, so free again");
        tokio::time::advance(Duration::from_secs(1)).await;
        Cooldown::roll_back(&mut a, first);
        assert!(
            c.reserve(&mut a, false).is_none(),
            "a stale rollback must not free a newer reservation"
        );
        Cooldown::roll_back(&mut a, second);
        assert!(c.reserve(&mut a, false).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn zero_window_never_suppresses_and_forced_always_reserves() {
        let c = Cooldown::new(Duration::ZERO);
        let mut a = None;
        assert!(c.reserve(&mut a, false).is_some());
        assert!(c.reserve(&mut a, false).is_some());
        let (c, mut b) = (Cooldown::new(Duration::from_secs(30)), None);
        assert!(c.reserve(&mut b, false).is_some());
        assert!(c.reserve(&mut b, false).is_none());
        assert!(c.reserve(&mut b, true).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn restored_wakes_keep_the_window_closed() {
        let c = Cooldown::new(Duration::from_secs(30));
        let (mut a, mut b) = (None, None);
        c.restore(&mut a, Duration::from_secs(10));
        c.restore(&mut b, Duration::from_secs(40));
        assert!(c.reserve(&mut a, false).is_none());
        assert_eq!(c.remaining(&a), Duration::from_secs(20));
        assert!(c.reserve(&mut b, false).is_some());
    }
}
