//! A usage limit as an agent announces it ([`Notice`]: its kind and its reset as written), and
//! the reset read and shown: written as people write times (`3pm (Europe/London)`, `Dec 3,
//! 9am`, `in 2h 5m`) or as a timestamp. Pure.

use jiff::Timestamp;
use jiff::civil::{Date, DateTime, Time};
use jiff::tz::TimeZone;
use serde_json::Value;

/// For a notice read as it was written (a hook, a transcript record, the screen right after a
/// resume): a clock time this far in the past still means today's, read a moment after it.
pub const WRITTEN_NOW: i64 = 5 * 60_000;
/// A notice shows its reset to the minute, so the limit lifts by that minute's last millisecond:
/// a resume timed by it never meets a limit not lifted yet.
pub const TO_THE_MINUTE_MS: i64 = 59_999;
/// For a notice found on a screen, written at a moment not known: a time passed within the last
/// day is taken as passed (misreading it costs one resume try; the other reading a day).
pub const WRITTEN_EARLIER: i64 = 24 * 3_600_000;

/// A usage limit as an agent announced it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// `session limit`, `weekly limit`, `Opus limit`, `5-hour limit`, ...
    pub kind: String,
    /// The reset as shown (`3pm (Europe/London)`, `in 2h 5m`); `None` for a monthly limit.
    pub resets: Option<String>,
}

impl Notice {
    /// The reset as unix ms, as [`parse_reset`] reads it.
    pub fn resets_at_ms(&self, now_ms: i64, past_ms: i64, local: &TimeZone) -> Option<i64> {
        parse_reset(self.resets.as_deref()?, now_ms, past_ms, local)
    }

    /// The latest moment the limit may lift: the last millisecond of the minute shown, or of the
    /// second for a relative reset given in seconds (`in 40s`).
    pub fn lifts_by_ms(&self, now_ms: i64, past_ms: i64, local: &TimeZone) -> Option<i64> {
        let text = self.resets.as_deref()?;
        let in_seconds = text.trim().starts_with("in ") && text.trim_end().ends_with('s');
        let slack = if in_seconds { 999 } else { TO_THE_MINUTE_MS };
        Some((self.resets_at_ms(now_ms, past_ms, local)?).saturating_add(slack))
    }
}
/// A transcript's API-error record of a usage limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptNotice {
    pub notice: Notice,
    /// The record's `timestamp` (unix ms): the moment the notice's reset is relative to.
    pub at_ms: Option<i64>,
    /// The exact reset (`quotaLimits.resetsAt`), when the record carries it.
    pub resets_at_ms: Option<i64>,
}
/// A `resets_at` as unix ms (a status line's, a rollout's): seconds or milliseconds since the
/// epoch, or RFC 3339.
pub fn reset_ms(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n
            .as_f64()
            .map(|x| if x < 1e11 { x * 1000.0 } else { x } as i64),
        Value::String(s) => s.parse::<Timestamp>().ok().map(Timestamp::as_millisecond),
        _ => None,
    }
}
/// A reset as an agent writes it, as unix ms at `now_ms` (`local` for a time without a zone):
/// a time without a date is its occurrence nearest to now no more than `past_ms` back.
pub fn parse_reset(text: &str, now_ms: i64, past_ms: i64, local: &TimeZone) -> Option<i64> {
    let text = text.replace(['\u{a0}', '\u{202f}'], " ");
    let text = text.trim();
    if let Some(relative) = text.strip_prefix("in ") {
        return now_ms.checked_add(relative_ms(relative)?);
    }
    let (when, zone) = match text.rsplit_once(" (") {
        Some((when, zone)) => {
            let name = zone.strip_suffix(')')?;
            (when, TimeZone::get(name).unwrap_or_else(|_| local.clone()))
        }
        None => (text, local.clone()),
    };
    let now = Timestamp::from_millisecond(now_ms)
        .ok()?
        .to_zoned_datetime(zone.clone());
    let parts: Vec<&str> = when.split(", ").map(str::trim).collect();
    let at = |day: Date, time: Time| {
        zone.to_timestamp(DateTime::from_parts(day, time))
            .ok()
            .map(Timestamp::as_millisecond)
    };
    let not_before = now_ms.saturating_sub(past_ms);
    let next = |candidates: Vec<Option<i64>>| {
        candidates
            .into_iter()
            .flatten()
            .filter(|&ms| ms >= not_before)
            .min_by_key(|&ms| ms.abs_diff(now_ms))
    };
    match parts.as_slice() {
        [clock] => {
            let time = clock_time(clock)?;
            let today = now.date();
            next(vec![
                today.yesterday().ok().and_then(|d| at(d, time)),
                at(today, time),
                today.tomorrow().ok().and_then(|d| at(d, time)),
            ])
        }
        [month_day, clock] => {
            let time = clock_time(clock)?;
            let year = now.year();
            next(
                [year - 1, year, year + 1]
                    .into_iter()
                    .map(|y| month_day_in(month_day, y).and_then(|d| at(d, time)))
                    .collect(),
            )
        }
        [month_day, year, clock] => at(
            month_day_in(month_day, year.parse().ok()?)?,
            clock_time(clock)?,
        ),
        _ => None,
    }
}

/// How wakebridge shows a reset at `now_ms`: `resets 15:00, in 1h 12m` (the clock in `local`,
/// with the date when it is not today), `reset passed 3m ago`, or `reset time unknown`.
pub fn describe_reset(resets_at_ms: Option<i64>, now_ms: i64, local: &TimeZone) -> String {
    let Some(at) = resets_at_ms.and_then(|ms| Timestamp::from_millisecond(ms).ok()) else {
        return "reset time unknown".to_owned();
    };
    let span = |ms: i64| {
        let minutes = ms / 60_000;
        match (minutes / 1440, minutes % 1440 / 60, minutes % 60) {
            (0, 0, 0) => format!("{}s", ms / 1000),
            (0, 0, m) => format!("{m}m"),
            (0, h, m) => format!("{h}h {m}m"),
            (d, h, _) => format!("{d}d {h}h"),
        }
    };
    if at.as_millisecond() <= now_ms {
        return format!("reset passed {} ago", span(now_ms - at.as_millisecond()));
    }
    let zoned = at.to_zoned_datetime(local.clone());
    let today = Timestamp::from_millisecond(now_ms)
        .map(|now| now.to_zoned_datetime(local.clone()).date())
        .ok();
    let clock = if today == Some(zoned.date()) {
        zoned.strftime("%H:%M").to_string()
    } else {
        zoned.strftime("%b %-d %H:%M").to_string()
    };
    format!("resets {clock}, in {}", span(at.as_millisecond() - now_ms))
}

/// `2h 5m`, `1d 2h 3m`, `5m 30s`, `45s`, `1.5s` as milliseconds.
fn relative_ms(text: &str) -> Option<i64> {
    let mut total = 0.0;
    for part in text.split_whitespace() {
        let unit_at = part.find(|c: char| c.is_ascii_alphabetic())?;
        let (number, unit) = part.split_at(unit_at);
        let number: f64 = number.parse().ok()?;
        let unit_ms = match unit {
            "d" => 86_400_000.0,
            "h" => 3_600_000.0,
            "m" => 60_000.0,
            "s" => 1_000.0,
            _ => return None,
        };
        total += number * unit_ms;
    }
    (total > 0.0 && total.is_finite()).then_some(total as i64)
}

/// `Dec 3` in `year`.
fn month_day_in(text: &str, year: i16) -> Option<Date> {
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let (month, day) = text.split_once(' ')?;
    let month = month.get(..3)?.to_lowercase();
    let month = MONTHS.iter().position(|m| *m == month)? + 1;
    Date::new(year, i8::try_from(month).ok()?, day.trim().parse().ok()?).ok()
}

/// `3pm`, `3:45pm`, `3 PM`, `12am`, `15:00`.
fn clock_time(text: &str) -> Option<Time> {
    let lower = text.trim().to_lowercase();
    let (digits, meridiem) = match (lower.strip_suffix("am"), lower.strip_suffix("pm")) {
        (Some(d), _) => (d.trim_end(), Some(false)),
        (_, Some(d)) => (d.trim_end(), Some(true)),
        _ => (lower.as_str(), None),
    };
    let (hour, minute) = match digits.split_once(':') {
        Some((h, m)) if m.len() == 2 => (h.parse::<i8>().ok()?, m.parse::<i8>().ok()?),
        None if meridiem.is_some() => (digits.parse::<i8>().ok()?, 0),
        _ => return None,
    };
    let hour = match meridiem {
        Some(pm) if (1..=12).contains(&hour) => hour % 12 + if pm { 12 } else { 0 },
        Some(_) => return None,
        None => hour,
    };
    Time::new(hour, minute, 0, 0).ok()
}
#[cfg(test)]
mod tests {
    use super::*;

    fn utc() -> TimeZone {
        TimeZone::UTC
    }

    /// Unix ms of an RFC 3339 time.
    fn ms(text: &str) -> i64 {
        text.parse::<Timestamp>().unwrap().as_millisecond()
    }

    #[test]
    fn clock_times_are_the_next_occurrence_in_their_zone() {
        let now = ms("2026-12-01T14:00:00Z");
        let at = |text: &str| parse_reset(text, now, WRITTEN_NOW, &utc());
        assert_eq!(at("3pm"), Some(ms("2026-12-01T15:00:00Z")));
        assert_eq!(at("3:45pm"), Some(ms("2026-12-01T15:45:00Z")));
        assert_eq!(at("3\u{202f}PM"), Some(ms("2026-12-01T15:00:00Z")));
        assert_eq!(at("15:00"), Some(ms("2026-12-01T15:00:00Z")));
        // Earlier than now: tomorrow (day rollover), unless just past.
        assert_eq!(at("9am"), Some(ms("2026-12-02T09:00:00Z")));
        assert_eq!(at("12am"), Some(ms("2026-12-02T00:00:00Z")));
        assert_eq!(at("1:57pm"), Some(ms("2026-12-01T13:57:00Z")));
        // A zone of its own: 3pm in New York (UTC-5 in December) is 20:00 UTC.
        assert_eq!(
            at("3pm (America/New_York)"),
            Some(ms("2026-12-01T20:00:00Z"))
        );
        // The daemon's own zone for a time without one.
        let tokyo = TimeZone::get("Asia/Tokyo").unwrap();
        assert_eq!(
            parse_reset("11pm", now, WRITTEN_NOW, &tokyo),
            Some(ms("2026-12-01T14:00:00Z"))
        );
        // Across midnight in the named zone: 1am in Tokyo is 16:00 UTC today.
        assert_eq!(at("1am (Asia/Tokyo)"), Some(ms("2026-12-01T16:00:00Z")));
        // Found on a screen, written a while ago: the nearest, so a time that passed today has
        // passed (resuming now costs a try at worst; tomorrow's would cost the day).
        let seen = |text: &str| parse_reset(text, now, WRITTEN_EARLIER, &utc());
        assert_eq!(seen("9am"), Some(ms("2026-12-01T09:00:00Z")));
        assert_eq!(seen("3pm"), Some(ms("2026-12-01T15:00:00Z")));
        assert_eq!(seen("11pm"), Some(ms("2026-12-01T23:00:00Z")));
    }

    #[test]
    fn dates_years_and_relative_resets() {
        let now = ms("2026-12-30T10:00:00Z");
        let at = |text: &str| parse_reset(text, now, WRITTEN_NOW, &utc());
        assert_eq!(at("Dec 31, 3pm"), Some(ms("2026-12-31T15:00:00Z")));
        // Without a year across the new year: the next one.
        assert_eq!(at("Jan 2, 3pm"), Some(ms("2027-01-02T15:00:00Z")));
        let january = ms("2027-01-02T10:00:00Z");
        assert_eq!(
            parse_reset("Dec 31, 3pm", january, WRITTEN_EARLIER, &utc()),
            Some(ms("2027-12-31T15:00:00Z")),
            "a day and more ago is not a reset that passed"
        );
        assert_eq!(
            parse_reset("Jan 1, 3pm", january, WRITTEN_EARLIER, &utc()),
            Some(ms("2027-01-01T15:00:00Z"))
        );
        assert_eq!(
            at("Jan 2, 2027, 3:30pm (UTC)"),
            Some(ms("2027-01-02T15:30:00Z"))
        );
        assert_eq!(at("in 2h 5m"), Some(now + 7_500_000));
        assert_eq!(at("in 1d 2h 3m"), Some(now + 93_780_000));
        assert_eq!(at("in 45s"), Some(now + 45_000));
        for bad in [
            "",
            "soon",
            "in",
            "in 5x",
            "25:00",
            "13pm",
            "Foo 3, 3pm",
            "3pm (",
            "0am",
        ] {
            assert_eq!(at(bad), None, "{bad:?}");
        }
        // An unknown zone name falls back to the daemon's zone rather than losing the time.
        assert_eq!(at("3pm (Mars/Olympus)"), Some(ms("2026-12-30T15:00:00Z")));
    }

    #[test]
    fn resets_are_described_with_the_clock_and_what_is_left() {
        let now = ms("2026-12-01T13:48:00Z");
        let show = |at: Option<&str>| describe_reset(at.map(ms), now, &utc());
        assert_eq!(
            show(Some("2026-12-01T15:00:00Z")),
            "resets 15:00, in 1h 12m"
        );
        assert_eq!(show(Some("2026-12-01T13:55:00Z")), "resets 13:55, in 7m");
        assert_eq!(
            show(Some("2026-12-03T09:00:00Z")),
            "resets Dec 3 09:00, in 1d 19h"
        );
        assert_eq!(show(Some("2026-12-01T13:45:00Z")), "reset passed 3m ago");
        assert_eq!(show(Some("2026-12-01T13:47:20Z")), "reset passed 40s ago");
        assert_eq!(show(None), "reset time unknown");
    }

    #[test]
    fn a_notices_reset_lifts_by_the_end_of_the_minute_it_shows() {
        let utc = TimeZone::UTC;
        let now = 1_796_000_000_000; // 2026-12-01 16:53:20 UTC
        let at = |text: &str| Notice {
            kind: "5-hour limit".into(),
            resets: Some(text.into()),
        };
        let shown = at("5:16pm (UTC)").resets_at_ms(now, WRITTEN_NOW, &utc);
        let by = at("5:16pm (UTC)").lifts_by_ms(now, WRITTEN_NOW, &utc);
        assert_eq!(by, shown.map(|ms| ms + TO_THE_MINUTE_MS));
        assert_eq!(
            at("in 40s").lifts_by_ms(now, WRITTEN_NOW, &utc),
            Some(now + 40_999)
        );
        assert_eq!(
            at("in 2h 5m").lifts_by_ms(now, WRITTEN_NOW, &utc),
            Some(now + 7_500_000 + TO_THE_MINUTE_MS)
        );
    }
}
