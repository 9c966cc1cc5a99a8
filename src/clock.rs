//! Wall-clock time, read and converted in one place: unix milliseconds (the ledger's unit), unix
//! seconds (the status-line feed), [`Timestamp`] (the views), so each unit's edge cases (before
//! 1970, out of range) are decided once.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jiff::Timestamp;

/// A span as whole milliseconds, saturating.
pub fn duration_ms(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

pub fn now_ms() -> i64 {
    ms(SystemTime::now())
}

pub fn now_s() -> u64 {
    u64::try_from(now_ms() / 1000).unwrap_or(0)
}

/// `at` in unix milliseconds; times before 1970 give 0.
pub fn ms(at: SystemTime) -> i64 {
    at.duration_since(UNIX_EPOCH).map_or(0, duration_ms)
}

pub fn from_s(seconds: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(seconds)
}

/// Unix milliseconds as a [`Timestamp`] to the second; `None` out of jiff's range.
pub fn shown_ms(ms: i64) -> Option<Timestamp> {
    Timestamp::from_second(ms.div_euclid(1000)).ok()
}

/// `at` as a [`Timestamp`] to the second.
pub fn shown(at: SystemTime) -> Option<Timestamp> {
    shown_ms(ms(at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_agree_and_edges_are_decided() {
        let at = from_s(1_700_000_000) + Duration::from_millis(1_999);
        assert_eq!(ms(at), 1_700_000_001_999);
        assert_eq!(shown(at).map(Timestamp::as_second), Some(1_700_000_001));
        assert_eq!(ms(UNIX_EPOCH - Duration::from_secs(5)), 0);
        assert_eq!(shown_ms(-1).map(Timestamp::as_second), Some(-1));
        assert_eq!(shown_ms(i64::MAX), None);
        assert!(now_s() > 1_700_000_000 && now_ms() / 1000 >= i64::try_from(now_s()).unwrap_or(0));
    }
}
