//! The one "warned about this already?" mechanism: the first occurrence is a WARNING, repeats are
//! debug, until re-armed (`first`, `clear`) or once per window (`first_in`). The key set is capped
//! and emptied when full, so varying ids cannot grow it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::lock;

/// Most distinct keys remembered before the set is emptied (the reference's cap).
pub const WARN_KEY_CAP: usize = 256;
/// The reference's window for rejection warnings: one per reason per minute.
pub const WARN_WINDOW: Duration = Duration::from_secs(60);

#[derive(Debug)]
pub struct Warnings {
    seen: Mutex<HashMap<String, Instant>>,
    cap: usize,
}

impl Default for Warnings {
    fn default() -> Self {
        Self::with_cap(WARN_KEY_CAP)
    }
}

impl Warnings {
    /// A set holding at most `cap` keys (at least one, so a key can always be remembered).
    pub fn with_cap(cap: usize) -> Self {
        Self {
            seen: Mutex::new(HashMap::new()),
            cap: cap.max(1),
        }
    }

    /// Whether this occurrence of `key` deserves the WARNING: the first since it was cleared.
    pub fn first(&self, key: &str) -> bool {
        self.due(key, None)
    }

    /// Whether this occurrence of `key` deserves the WARNING: the first within `window`.
    pub fn first_in(&self, key: &str, window: Duration) -> bool {
        self.due(key, Some(window))
    }

    fn due(&self, key: &str, window: Option<Duration>) -> bool {
        let now = Instant::now();
        let mut seen = lock(&self.seen);
        if let Some(at) = seen.get(key)
            && window.is_none_or(|w| now.duration_since(*at) < w)
        {
            return false;
        }
        if seen.len() >= self.cap && !seen.contains_key(key) {
            seen.clear();
        }
        seen.insert(key.to_owned(), now);
        true
    }

    /// One attempt at what `key` names: success re-arms it, and a failure is returned when it
    /// deserves the WARNING (the first since the last success).
    pub fn first_err<'r, T, E>(&self, key: &str, result: &'r Result<T, E>) -> Option<&'r E> {
        match result {
            Ok(_) => {
                self.clear(key);
                None
            }
            Err(e) => self.first(key).then_some(e),
        }
    }

    /// Re-arms `key`: its next occurrence warns again.
    pub fn clear(&self, key: &str) {
        lock(&self.seen).remove(key);
    }

    /// Re-arms every key that starts with `prefix` (all of one session's conditions).
    pub fn clear_prefix(&self, prefix: &str) {
        lock(&self.seen).retain(|key, _| !key.starts_with(prefix));
    }

    pub fn contains(&self, key: &str) -> bool {
        lock(&self.seen).contains_key(key)
    }

    /// How many keys it remembers.
    pub fn remembered(&self) -> usize {
        lock(&self.seen).len()
    }
}

/// Logs at WARN when `$first` holds (a [`Warnings`] said so), else at DEBUG.
#[macro_export]
macro_rules! warn_or_debug {
    ($first:expr, $($arg:tt)+) => {
        if $first {
            tracing::warn!($($arg)+);
        } else {
            tracing::debug!($($arg)+);
        }
    };
}

/// Logs at WARN when `$warnings.first_in($key, WARN_WINDOW)`, else at DEBUG.
#[macro_export]
macro_rules! warn_limited {
    ($warnings:expr, $key:expr, $($arg:tt)+) => {
        $crate::warn_or_debug!(
            $warnings.first_in($key, $crate::telemetry::warn::WARN_WINDOW),
            $($arg)+
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warns_once_until_cleared() {
        let warned = Warnings::default();
        assert!(warned.first("unparseable"));
        assert!(!warned.first("unparseable"));
        assert!(warned.first("unreadable"), "keys are per condition");
        warned.clear("unparseable");
        assert!(warned.first("unparseable"));
        assert!(warned.first("s1:timeout") && warned.first("s1:exit") && warned.first("s2:exit"));
        warned.clear_prefix("s1:");
        assert!(warned.first("s1:timeout") && warned.first("s1:exit") && !warned.first("s2:exit"));
    }

    #[test]
    fn first_err_warns_the_first_failure_after_a_success() {
        let warned = Warnings::default();
        let (ok, err) = (Ok::<(), &str>(()), Err::<(), &str>("boom"));
        assert_eq!(warned.first_err("read", &err), Some(&"boom"));
        assert_eq!(warned.first_err("read", &err), None);
        assert_eq!(warned.first_err("read", &ok), None);
        assert_eq!(warned.first_err("read", &err), Some(&"boom"));
    }

    #[test]
    fn full_set_is_cleared_wholesale_and_never_exceeds_the_cap() {
        let warned = Warnings::with_cap(2);
        let warnings: Vec<bool> = ["s1", "s2", "s3", "s1"]
            .iter()
            .map(|key| {
                let warn = warned.first(key);
                assert!(warned.remembered() <= 2);
                warn
            })
            .collect();
        assert_eq!(warnings, [true, true, true, true]);
        assert!(warned.contains("s3") && warned.contains("s1") && !warned.contains("s2"));
    }

    #[test]
    fn zero_cap_still_remembers_one_key() {
        let warned = Warnings::with_cap(0);
        assert!(warned.first("a"));
        assert!(!warned.first("a"));
    }

    #[tokio::test(start_paused = true)]
    async fn warns_once_per_window_per_key() {
        let limiter = Warnings::default();
        assert!(limiter.first_in("host", WARN_WINDOW));
        assert!(!limiter.first_in("host", WARN_WINDOW));
        assert!(limiter.first_in("content-type", WARN_WINDOW));
        tokio::time::advance(Duration::from_secs(59)).await;
        assert!(!limiter.first_in("host", WARN_WINDOW));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(limiter.first_in("host", WARN_WINDOW));
    }
}
