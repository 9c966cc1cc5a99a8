//! The nudge backoff, pure. The first nudge may follow the last keystrokes typed by `base`; after
//! the n-th unanswered nudge the next waits `base * 2^(n-1)`, capped at `max`. After
//! `acknowledge_after` unanswered nudges the session is left alone until real activity.

use std::ops::Add;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    pub base: Duration,
    pub max: Duration,
    /// 0 never nudges at all.
    pub acknowledge_after: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next<T> {
    /// Not before this time (it may already have passed).
    At(T),
    /// Nothing was ever typed: a nudge may go as soon as the session is idle.
    Whenever,
    Acknowledged,
}

impl<T: Copy + Ord> Next<T> {
    pub fn due(&self, now: T) -> bool {
        match self {
            Next::At(at) => now >= *at,
            Next::Whenever => true,
            Next::Acknowledged => false,
        }
    }
}

/// One session's unanswered nudges, generic over the time type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NudgeCount<T> {
    pub unanswered: u32,
    pub last_nudge: Option<T>,
}

impl<T> Default for NudgeCount<T> {
    fn default() -> Self {
        Self {
            unanswered: 0,
            last_nudge: None,
        }
    }
}

impl<T: Copy> NudgeCount<T> {
    pub fn nudged(&mut self, at: T) {
        self.unanswered = self.unanswered.saturating_add(1);
        self.last_nudge = Some(at);
    }

    /// Real activity: returns whether there was anything to forget. The last nudge time is
    /// kept: it still spaces the next nudge.
    pub fn reset(&mut self) -> bool {
        let had = self.unanswered > 0;
        self.unanswered = 0;
        had
    }
}

impl Schedule {
    /// `base` for 0 and 1 unanswered, then doubling, never above `max` (nor below `base`).
    pub fn gap(&self, unanswered: u32) -> Duration {
        let doublings = unanswered.saturating_sub(1);
        let factor = 1u32.checked_shl(doublings).unwrap_or(u32::MAX);
        self.base
            .saturating_mul(factor)
            .min(self.max.max(self.base))
    }

    pub fn acknowledged(&self, unanswered: u32) -> bool {
        unanswered >= self.acknowledge_after
    }

    /// `last_typed`: a wake or warning counts as a nudge for spacing.
    pub fn next<T>(&self, count: &NudgeCount<T>, last_typed: Option<T>) -> Next<T>
    where
        T: Copy + Ord + Add<Duration, Output = T>,
    {
        if self.acknowledged(count.unanswered) {
            return Next::Acknowledged;
        }
        match count.last_nudge.max(last_typed) {
            Some(at) => Next::At(at + self.gap(count.unanswered)),
            None => Next::Whenever,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seconds as a time type: plain arithmetic, so the tables read as numbers.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    struct T(u64);
    impl Add<Duration> for T {
        type Output = T;
        fn add(self, d: Duration) -> T {
            T(self.0 + d.as_secs())
        }
    }

    fn defaults() -> Schedule {
        Schedule {
            base: Duration::from_secs(90),
            max: Duration::from_secs(15 * 60),
            acknowledge_after: 5,
        }
    }

    #[test]
    fn gaps_double_from_base_to_the_cap() {
        let s = Schedule {
            acknowledge_after: 100,
            ..defaults()
        };
        let table = [
            (0, 90),
            (1, 90),
            (2, 180),
            (3, 360),
            (4, 720),
            (5, 900),
            (6, 900),
            (31, 900),
            (32, 900),
            (u32::MAX, 900),
        ];
        for (unanswered, gap) in table {
            assert_eq!(s.gap(unanswered), Duration::from_secs(gap), "{unanswered}");
        }
    }

    #[test]
    fn a_series_of_unanswered_nudges_is_spaced_and_then_acknowledged() {
        let s = defaults();
        let mut count = NudgeCount::default();
        let mut now = T(1000);
        assert_eq!(s.next(&count, None), Next::Whenever);
        let mut sent = Vec::new();
        for _ in 0..10 {
            match s.next(&count, count.last_nudge) {
                Next::Acknowledged => break,
                Next::Whenever => {}
                Next::At(at) => now = at,
            }
            count.nudged(now);
            sent.push(now.0);
        }
        assert_eq!(sent, [1000, 1090, 1270, 1630, 2350]);
        assert_eq!(count.unanswered, 5);
        assert_eq!(s.next(&count, Some(T(9999))), Next::Acknowledged);
    }

    #[test]
    fn activity_resets_the_series_but_keeps_spacing_from_the_last_nudge() {
        let s = defaults();
        let mut count = NudgeCount::default();
        for at in [0, 90, 270, 630, 1350] {
            count.nudged(T(at));
        }
        assert_eq!(s.next(&count, None), Next::Acknowledged);
        assert!(count.reset());
        assert!(!count.reset(), "a second reset has nothing to forget");
        assert_eq!(count.unanswered, 0);
        assert_eq!(s.next(&count, None), Next::At(T(1350 + 90)));
    }

    #[test]
    fn typing_by_others_counts_as_a_nudge_for_spacing() {
        let s = defaults();
        let mut count = NudgeCount::default();
        // A wake typed at 500 delays the first nudge to 590.
        assert_eq!(s.next(&count, Some(T(500))), Next::At(T(590)));
        count.nudged(T(600));
        // A context warning typed at 650 pushes the second nudge from 690 to 740.
        assert_eq!(s.next(&count, Some(T(650))), Next::At(T(740)));
        // An older wake changes nothing.
        assert_eq!(s.next(&count, Some(T(10))), Next::At(T(690)));
    }

    #[test]
    fn due_compares_with_now() {
        assert!(Next::At(T(5)).due(T(5)));
        assert!(!Next::At(T(5)).due(T(4)));
        assert!(Next::<T>::Whenever.due(T(0)));
        assert!(!Next::<T>::Acknowledged.due(T(u64::MAX)));
    }

    #[test]
    fn zero_acknowledge_after_never_nudges_and_a_small_cap_is_respected() {
        let never = Schedule {
            acknowledge_after: 0,
            ..defaults()
        };
        assert_eq!(
            never.next::<T>(&NudgeCount::default(), None),
            Next::Acknowledged
        );
        let odd = Schedule {
            base: Duration::from_secs(90),
            max: Duration::from_secs(30),
            acknowledge_after: 5,
        };
        assert_eq!(
            odd.gap(4),
            Duration::from_secs(90),
            "max below base keeps base"
        );
    }

    #[test]
    fn count_saturates_instead_of_overflowing() {
        let mut count = NudgeCount {
            unanswered: u32::MAX,
            last_nudge: Some(T(0)),
        };
        count.nudged(T(1));
        assert_eq!(count.unanswered, u32::MAX);
    }
}
