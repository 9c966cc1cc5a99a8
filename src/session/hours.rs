//! `[schedule]`: the hours in which wakebridge starts work on its own (nudges, resumes at a
//! usage limit's reset, automatic rewinds), in local time on the days given. Outside them those
//! steps wait for the next active stretch; bus wakes, owed wakes, warnings and what a person asks
//! for still go. Pure: the zone comes with the time.

use jiff::civil::{Time, Weekday};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

use crate::api::SessionState;
use crate::session::decide::{Now, Step};
use crate::store::RewindWhy;

/// When work on wakebridge's own initiative may start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveHours {
    /// `None`: the whole day. A start after its end runs across midnight (`22:00-06:00`).
    window: Option<(Time, Time)>,
    /// Monday first; a stretch across midnight belongs to the day it starts on.
    days: [bool; 7],
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HoursError {
    #[error(
        "schedule.active_hours {0:?} is not a range of local times; write it like \"08:00-20:00\" \
         (\"22:00-06:00\" runs across midnight), or \"\" for the whole day \
         (WAKEBRIDGE_SCHEDULE__ACTIVE_HOURS)"
    )]
    Hours(String),
    #[error(
        "schedule.active_days has {0:?}, which is no day; use mon, tue, wed, thu, fri, sat, sun \
         (WAKEBRIDGE_SCHEDULE__ACTIVE_DAYS)"
    )]
    Day(String),
    #[error(
        "schedule.active_days is empty, so wakebridge would never start work on its own; list \
         the days, or turn the nudger off with nudger.enabled = false"
    )]
    NoDays,
}

const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

impl Default for ActiveHours {
    fn default() -> Self {
        Self {
            window: None,
            days: [true; 7],
        }
    }
}

impl ActiveHours {
    pub fn parse(hours: &str, days: &[String]) -> Result<Self, HoursError> {
        let window = match hours.trim() {
            "" => None,
            range => {
                let bad = || HoursError::Hours(hours.to_owned());
                let (start, end) = range.split_once('-').ok_or_else(bad)?;
                let time = |t: &str| t.trim().parse::<Time>().map_err(|_| bad());
                let (start, end) = (time(start)?, time(end)?);
                if start == end {
                    return Err(bad());
                }
                Some((start, end))
            }
        };
        let mut active = [false; 7];
        for day in days {
            let at = DAYS.iter().position(|d| d.eq_ignore_ascii_case(day.trim()));
            active[at.ok_or_else(|| HoursError::Day(day.clone()))?] = true;
        }
        if !active.contains(&true) {
            return Err(HoursError::NoDays);
        }
        Ok(Self {
            window,
            days: active,
        })
    }

    fn day_on(&self, day: Weekday) -> bool {
        self.days[usize::from(day.to_monday_zero_offset().unsigned_abs())]
    }

    /// `None` while active at `now_ms`; else when (unix ms) the next active stretch begins.
    pub fn quiet_until(&self, now_ms: i64, tz: &TimeZone) -> Option<i64> {
        let now = Timestamp::from_millisecond(now_ms)
            .ok()?
            .to_zoned_datetime(tz.clone());
        let (date, time) = (now.date(), now.time());
        let active = match self.window {
            None => self.day_on(date.weekday()),
            Some((start, end)) if start < end => {
                self.day_on(date.weekday()) && start <= time && time < end
            }
            // Across midnight: the evening part is today's, the morning part yesterday's.
            Some((start, end)) => {
                (time >= start && self.day_on(date.weekday()))
                    || (time < end && self.day_on(date.yesterday().ok()?.weekday()))
            }
        };
        if active {
            return None;
        }
        let start = self.window.map_or(Time::midnight(), |(start, _)| start);
        (0..=7)
            .filter_map(|ahead| date.checked_add(ahead.days()).ok())
            .filter(|day| self.day_on(day.weekday()))
            .filter_map(|day| tz.to_timestamp(day.to_datetime(start)).ok())
            .map(Timestamp::as_millisecond)
            .find(|&at| at > now_ms)
    }
}

/// `step`, unless it is work on wakebridge's own initiative outside the active hours: then a
/// wait until they begin again.
pub fn in_hours(step: Step, hours: &ActiveHours, now: &Now) -> Step {
    let state = match &step {
        Step::Nudge | Step::BudgetNudge(_) => SessionState::Idle,
        Step::Resume { .. } => SessionState::Limited,
        Step::Rewind(pending) if pending.why == RewindWhy::Auto => SessionState::Rewinding,
        _ => return step,
    };
    let Some(until) = hours.quiet_until(now.ms, &now.local) else {
        return step;
    };
    let shown = Timestamp::from_millisecond(until)
        .map(|at| {
            at.to_zoned_datetime(now.local.clone())
                .strftime("%a %H:%M")
                .to_string()
        })
        .unwrap_or_default();
    Step::WaitUntil(until, state, format!("quiet hours until {shown}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hours(range: &str, days: &[&str]) -> ActiveHours {
        let days: Vec<String> = days.iter().map(|d| (*d).to_owned()).collect();
        ActiveHours::parse(range, &days).unwrap()
    }

    /// Unix ms of a UTC time on Monday 2026-11-30.
    fn monday(hh: i8, mm: i8) -> i64 {
        let at = jiff::civil::date(2026, 11, 30).at(hh, mm, 0, 0);
        TimeZone::UTC.to_timestamp(at).unwrap().as_millisecond()
    }

    const DAY_MS: i64 = 86_400_000;

    #[test]
    fn bad_settings_say_which_and_how_to_fix_them() {
        let days = |d: &[&str]| d.iter().map(|d| (*d).to_owned()).collect::<Vec<_>>();
        for bad in ["8-20", "08:00", "08:00-08:00", "25:00-26:00", "dawn-dusk"] {
            let error = ActiveHours::parse(bad, &days(&["mon"])).unwrap_err();
            assert_eq!(error, HoursError::Hours(bad.into()));
            assert!(error.to_string().contains("08:00-20:00"), "{error}");
        }
        let error = ActiveHours::parse("", &days(&["mon", "funday"])).unwrap_err();
        assert_eq!(error, HoursError::Day("funday".into()));
        assert_eq!(ActiveHours::parse("", &[]), Err(HoursError::NoDays));
        assert_eq!(
            ActiveHours::parse(" 08:00 - 20:00 ", &days(&["Mon"])),
            Ok(hours("08:00-20:00", &["mon"]))
        );
    }

    #[test]
    fn the_default_is_always_active() {
        let always = ActiveHours::default();
        for at in [monday(0, 0), monday(3, 17), monday(23, 59) + 3 * DAY_MS] {
            assert_eq!(always.quiet_until(at, &TimeZone::UTC), None);
        }
    }

    #[test]
    fn a_day_window_waits_for_its_start_on_the_next_active_day() {
        let weekdays = hours("08:00-20:00", &["mon", "tue", "wed", "thu", "fri"]);
        let utc = TimeZone::UTC;
        assert_eq!(weekdays.quiet_until(monday(8, 0), &utc), None);
        assert_eq!(weekdays.quiet_until(monday(19, 59), &utc), None);
        assert_eq!(weekdays.quiet_until(monday(7, 0), &utc), Some(monday(8, 0)));
        assert_eq!(
            weekdays.quiet_until(monday(20, 0), &utc),
            Some(monday(8, 0) + DAY_MS)
        );
        // Friday evening: Monday morning.
        assert_eq!(
            weekdays.quiet_until(monday(21, 0) + 4 * DAY_MS, &utc),
            Some(monday(8, 0) + 7 * DAY_MS)
        );
    }

    #[test]
    fn a_window_across_midnight_belongs_to_the_day_it_starts() {
        let nights = hours("22:00-06:00", &["mon"]);
        let utc = TimeZone::UTC;
        assert_eq!(nights.quiet_until(monday(23, 0), &utc), None);
        assert_eq!(
            nights.quiet_until(monday(5, 0) + DAY_MS, &utc),
            None,
            "Tuesday 05:00"
        );
        assert_eq!(
            nights.quiet_until(monday(5, 0), &utc),
            Some(monday(22, 0)),
            "Monday 05:00 is Sunday night's"
        );
        assert_eq!(
            nights.quiet_until(monday(7, 0) + DAY_MS, &utc),
            Some(monday(22, 0) + 7 * DAY_MS)
        );
    }

    #[test]
    fn only_work_of_its_own_waits_for_the_hours() {
        let weekdays = hours("08:00-20:00", &["mon"]);
        let now = Now {
            at: tokio::time::Instant::now(),
            ms: monday(21, 0),
            local: TimeZone::UTC,
        };
        let waited = in_hours(Step::Nudge, &weekdays, &now);
        assert_eq!(
            waited,
            Step::WaitUntil(
                monday(8, 0) + 7 * DAY_MS,
                SessionState::Idle,
                "quiet hours until Mon 08:00".into()
            )
        );
        let owed = Step::PayOwed(crate::session::gate::Mode::Gated);
        assert_eq!(in_hours(owed.clone(), &weekdays, &now), owed);
        let open = Now {
            ms: monday(9, 0),
            ..now
        };
        assert_eq!(in_hours(Step::Nudge, &weekdays, &open), Step::Nudge);
    }
}
