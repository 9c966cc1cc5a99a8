//! Rate-limited warnings: the first occurrence of a condition in a window is worth a WARNING,
//! repeats inside the window go to debug. Keys are conditions chosen by the caller (a rejection
//! reason, "unsafe-id"), never attacker-chosen values, so the key set stays small; it is capped
//! anyway and cleared wholesale when full.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// The reference's window: one warning per reason per minute.
pub const WARN_WINDOW: Duration = Duration::from_secs(60);
/// Most keys remembered before the set is cleared.
const MAX_KEYS: usize = 256;

#[derive(Debug)]
pub struct RateLimiter {
    window: Duration,
    last: Mutex<HashMap<String, Instant>>,
}

impl Default for RateLimiter {
    fn default() -> Self {
        Self::new(WARN_WINDOW)
    }
}

impl RateLimiter {
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            last: Mutex::new(HashMap::new()),
        }
    }

    /// True when `key` has not warned within the window (and records that it does now).
    pub fn should_warn(&self, key: &str) -> bool {
        let now = Instant::now();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = last.get(key)
            && now.duration_since(*at) < self.window
        {
            return false;
        }
        if last.len() >= MAX_KEYS {
            last.clear();
        }
        last.insert(key.to_string(), now);
        true
    }
}

/// Logs `message` at WARN the first time per window for `key`, at DEBUG otherwise.
#[macro_export]
macro_rules! warn_limited {
    ($limiter:expr, $key:expr, $($arg:tt)+) => {
        if $limiter.should_warn($key) {
            tracing::warn!($($arg)+);
        } else {
            tracing::debug!($($arg)+);
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn warns_once_per_window_per_key() {
        let limiter = RateLimiter::default();
        assert!(limiter.should_warn("host"));
        assert!(!limiter.should_warn("host"));
        assert!(limiter.should_warn("content-type"));
        tokio::time::advance(Duration::from_secs(59)).await;
        assert!(!limiter.should_warn("host"));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(limiter.should_warn("host"));
    }
}
