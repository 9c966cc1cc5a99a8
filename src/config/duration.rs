//! Durations as wakebridge's settings take them: seconds (`30`, `0.5`) or a number with a unit
//! (`"500ms"`, `"15m"`). The reference's own variables and flags keep plain seconds.

use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};

pub const FORMS: &str =
    "a number of seconds (90, 0.5) or a number with a unit (90s, 500ms, 15m, 2h, 7days)";

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DurationError {
    #[error("{text:?} is not a duration ({source}): use {FORMS}")]
    Unparsed {
        text: String,
        source: humantime::DurationError,
    },
    #[error("{0} is not a duration: use {FORMS}, not negative or infinite")]
    Seconds(f64),
}

/// Plain seconds, or humantime's forms.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<f64>() {
        return seconds_of(seconds);
    }
    humantime::parse_duration(text).map_err(|source| DurationError::Unparsed {
        text: text.to_string(),
        source,
    })
}

fn seconds_of(seconds: f64) -> Result<Duration, DurationError> {
    Duration::try_from_secs_f64(seconds).map_err(|_| DurationError::Seconds(seconds))
}

/// `#[serde(deserialize_with = "duration::deserialize")]` for every duration setting.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    struct Seconds;
    impl Visitor<'_> for Seconds {
        type Value = Duration;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(FORMS)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
            u64::try_from(v)
                .map(Duration::from_secs)
                .map_err(|_| E::custom(format!("{v} is not a duration: use {FORMS}, not negative")))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Duration, E> {
            seconds_of(v).map_err(E::custom)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
            parse(v).map_err(E::custom)
        }
    }
    deserializer.deserialize_any(Seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_and_units_both_work() {
        assert_eq!(parse("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse(" 15m "), Ok(Duration::from_secs(900)));
        assert_eq!(parse("7days"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
    }

    #[test]
    fn errors_say_which_forms_work() {
        for bad in ["soon", "-5", "inf", "5 parsecs"] {
            let e = parse(bad).expect_err(bad).to_string();
            assert!(e.contains("90s") && e.contains("seconds"), "{bad}: {e}");
        }
    }
}
