//! A bounded "have I already warned about this?" set: the first occurrence of a condition is a
//! WARNING, repeats are debug lines, and a condition re-arms when its caller clears it. It owns
//! the set and its size bound only; which keys exist and when they clear is the caller's policy
//! (`wake::reader` for `panes.json`, the injector for wake failures).
//!
//! The set is capped and cleared wholesale when full, so a publisher that varies session ids
//! cannot grow it without bound; the price is an occasional repeated warning, never silence.

use std::collections::HashSet;

/// Most distinct keys remembered before the set is cleared wholesale (the reference's cap).
pub const WARN_KEY_CAP: usize = 256;

/// Which keys have already produced their one warning.
#[derive(Debug, Clone)]
pub struct WarnOnce {
    keys: HashSet<String>,
    cap: usize,
}

impl Default for WarnOnce {
    fn default() -> Self {
        Self::with_cap(WARN_KEY_CAP)
    }
}

impl WarnOnce {
    pub fn new() -> Self {
        Self::default()
    }

    /// A set holding at most `cap` keys (at least one, so a key can always be remembered).
    pub fn with_cap(cap: usize) -> Self {
        Self {
            keys: HashSet::new(),
            cap: cap.max(1),
        }
    }

    /// Records `key` and says whether this occurrence deserves the WARNING (`true`) or is a
    /// repeat for debug level (`false`). A full set is emptied before a new key goes in.
    pub fn first(&mut self, key: &str) -> bool {
        if self.keys.contains(key) {
            return false;
        }
        if self.keys.len() >= self.cap {
            self.keys.clear();
        }
        self.keys.insert(key.to_owned());
        true
    }

    /// Re-arms `key`: its next occurrence warns again.
    pub fn clear(&mut self, key: &str) {
        self.keys.remove(key);
    }

    pub fn contains(&self, key: &str) -> bool {
        self.keys.contains(key)
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warns_once_until_cleared() {
        let mut warned = WarnOnce::new();
        assert!(warned.first("unparseable"));
        assert!(!warned.first("unparseable"));
        assert!(warned.first("unreadable"), "keys are per condition");
        warned.clear("unparseable");
        assert!(warned.first("unparseable"));
    }

    #[test]
    fn full_set_is_cleared_wholesale_and_never_exceeds_the_cap() {
        let mut warned = WarnOnce::with_cap(2);
        let warnings: Vec<bool> = ["s1", "s2", "s3", "s1"]
            .iter()
            .map(|key| {
                let warn = warned.first(key);
                assert!(warned.len() <= 2);
                warn
            })
            .collect();
        assert_eq!(warnings, [true, true, true, true]);
        assert!(warned.contains("s3") && warned.contains("s1") && !warned.contains("s2"));
    }

    #[test]
    fn zero_cap_still_remembers_one_key() {
        let mut warned = WarnOnce::with_cap(0);
        assert!(warned.first("a"));
        assert!(!warned.first("a"));
    }
}
