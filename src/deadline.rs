//! One monotonic deadline per unit of work, so a budget is spent once across several steps instead
//! of being granted afresh to each.

use std::time::Duration;
use tokio::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    at: Instant,
}

impl Deadline {
    pub fn after(budget: Duration) -> Self {
        Self {
            at: Instant::now() + budget,
        }
    }

    pub fn instant(&self) -> Instant {
        self.at
    }

    /// Time left, zero once passed.
    pub fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    pub fn expired(&self) -> bool {
        self.remaining().is_zero()
    }

    /// What is left, but never less than `floor`: a late step still gets a fair chance (the
    /// reference's 0.25 s rule).
    pub fn step_budget(&self, floor: Duration) -> Duration {
        self.remaining().max(floor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn remaining_counts_down_and_floors_at_zero() {
        let d = Deadline::after(Duration::from_secs(2));
        assert_eq!(d.remaining(), Duration::from_secs(2));
        tokio::time::advance(Duration::from_millis(1500)).await;
        assert_eq!(d.remaining(), Duration::from_millis(500));
        assert!(!d.expired());
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(d.remaining(), Duration::ZERO);
        assert!(d.expired());
    }

    #[tokio::test(start_paused = true)]
    async fn step_budget_never_drops_below_floor() {
        let d = Deadline::after(Duration::from_secs(2));
        let floor = Duration::from_millis(250);
        assert_eq!(d.step_budget(floor), Duration::from_secs(2));
        tokio::time::advance(Duration::from_millis(1900)).await;
        assert_eq!(d.step_budget(floor), floor);
    }
}
