//! `[budget]`: what the windows mean for the work wakebridge starts on its own. Near a window's
//! end with much of it unused, an idle session gets one budget nudge for that window (use it or
//! lose it); with a window nearly spent, no nudges at all (an idle nudge would burn what a real
//! task needs). Bus wakes, owed wakes and context warnings are not the budget's to hold. Pure.

use jiff::tz::TimeZone;

use super::caused::BUDGET_PREFIX;
use super::{Account, SAME_WINDOW_MS, WindowKind};
use crate::config::BudgetSettings;
use crate::mux::KeystrokeText;
use crate::reading::limit::describe_reset;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BudgetError {
    #[error(
        "budget.use_below ({use_below}) must be under budget.spare_from ({spare_from}) and both \
         at most 100 (WAKEBRIDGE_BUDGET__USE_BELOW, WAKEBRIDGE_BUDGET__SPARE_FROM)"
    )]
    Shares { use_below: u8, spare_from: u8 },
}

/// `[budget]`, validated: the shares in order and at most 100.
pub fn validate(s: &BudgetSettings) -> Result<BudgetSettings, BudgetError> {
    if s.use_below >= s.spare_from || s.spare_from > 100 {
        return Err(BudgetError::Shares {
            use_below: s.use_below,
            spare_from: s.spare_from,
        });
    }
    Ok(s.clone())
}

/// What the budget says about starting work on wakebridge's own initiative now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outlook {
    /// Nothing: no reading, or mid-window.
    Plain,
    /// Nearly spent: no nudges.
    Spare { kind: WindowKind, used: f64 },
    /// Near its end and under-used: one budget nudge per window.
    UseIt(Unused),
}

/// A window near its end with much of it unused, as its budget nudge tells it (`resets_at_ms`
/// names the window).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Unused {
    pub kind: WindowKind,
    pub used: f64,
    pub resets_at_ms: i64,
}

/// The outlook at `now_ms` for a session of `account` that last got a budget nudge at
/// `given_ms`. Spent wins over unused: a nearly spent week is not to be burnt because a 5-hour
/// window ends soon. A window near its end is owed a budget nudge unless one was given since it
/// came near (with the slack two readings of one window's reset may differ by): one per window,
/// and one covers windows that end together.
pub fn outlook(
    config: &BudgetSettings,
    account: Option<&Account>,
    now_ms: i64,
    given_ms: Option<i64>,
) -> Outlook {
    let Some(account) = account.filter(|_| config.enabled) else {
        return Outlook::Plain;
    };
    let running: Vec<_> = account
        .running(now_ms, crate::clock::duration_ms(config.stale_after))
        .collect();
    if let Some((kind, w)) = running
        .iter()
        .filter(|(_, w)| w.used_percentage >= f64::from(config.spare_from))
        .max_by(|a, b| a.1.used_percentage.total_cmp(&b.1.used_percentage))
    {
        return Outlook::Spare {
            kind: *kind,
            used: w.used_percentage,
        };
    }
    let within = crate::clock::duration_ms(config.use_within);
    let near = |at: i64| at.saturating_sub(now_ms) <= within;
    let given = |at: i64| {
        let near_from = at.saturating_sub(within).saturating_sub(SAME_WINDOW_MS);
        given_ms.is_some_and(|given| given >= near_from)
    };
    running
        .iter()
        .find_map(|(kind, w)| {
            let at = w.resets_at_ms.filter(|&at| near(at) && !given(at))?;
            (w.used_percentage < f64::from(config.use_below)).then_some(Outlook::UseIt(Unused {
                kind: *kind,
                used: w.used_percentage,
                resets_at_ms: at,
            }))
        })
        .unwrap_or(Outlook::Plain)
}

/// The budget nudge's text: what is left and when it resets, in the session's words.
pub fn nudge_text(unused: &Unused, now_ms: i64, local: &TimeZone) -> KeystrokeText {
    let left = (100.0 - unused.used).clamp(0.0, 100.0).round();
    let reset = describe_reset(Some(unused.resets_at_ms), now_ms, local);
    let text = format!(
        "{BUDGET_PREFIX}{left}% of the {} is still unused and it {reset}; unused it is lost. \
         If there is useful work left, carry on with it now.",
        unused.kind.describe()
    );
    // Built from our own words and numbers only; the wake prompt if that ever fails to be
    // typable rather than nothing.
    KeystrokeText::new(&text).unwrap_or_else(|_| KeystrokeText::wake_prompt())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::budget::Window;

    const NOW: i64 = 1_800_000_000_000;
    const MIN: i64 = 60_000;

    fn config() -> BudgetSettings {
        validate(&crate::config::defaults().budget).unwrap()
    }

    fn account(five: Option<(f64, i64)>, week: Option<(f64, i64)>) -> Account {
        let w = |(used, resets_in): (f64, i64)| Window {
            used_percentage: used,
            resets_at_ms: Some(NOW + resets_in),
            seen_ms: NOW - 3 * 60 * MIN,
        };
        Account {
            account: "/h/.claude".into(),
            five_hour: five.map(w),
            seven_day: week.map(w),
        }
    }

    #[test]
    fn defaults_nudge_under_sixty_percent_in_the_last_45_minutes_and_spare_from_ninety() {
        let c = config();
        assert!(c.enabled);
        assert_eq!((c.use_below, c.spare_from), (60, 90));
        assert_eq!(c.use_within, Duration::from_secs(45 * 60));
    }

    /// Every window/share combination the policy tells apart, on a fixed clock.
    #[test]
    fn each_window_and_share_gives_its_outlook() {
        let c = config();
        let at = |a: Account| outlook(&c, Some(&a), NOW, None);
        let five = WindowKind::FiveHour;
        let week = WindowKind::SevenDay;
        // Under-used near the end: use it.
        let use_it = |kind, used, resets_in| {
            Outlook::UseIt(Unused {
                kind,
                used,
                resets_at_ms: NOW + resets_in,
            })
        };
        assert_eq!(
            at(account(Some((40.0, 30 * MIN)), None)),
            use_it(five, 40.0, 30 * MIN)
        );
        assert_eq!(
            at(account(Some((40.0, 45 * MIN)), None)),
            use_it(five, 40.0, 45 * MIN)
        );
        // Too early, or used enough: nothing.
        assert_eq!(at(account(Some((40.0, 46 * MIN)), None)), Outlook::Plain);
        assert_eq!(at(account(Some((60.0, 30 * MIN)), None)), Outlook::Plain);
        assert_eq!(at(account(Some((89.0, 30 * MIN)), None)), Outlook::Plain);
        // Nearly spent: spare it, whatever the other window says.
        let spare = |kind, used| Outlook::Spare { kind, used };
        assert_eq!(
            at(account(Some((90.0, 4 * 60 * MIN)), None)),
            spare(five, 90.0)
        );
        assert_eq!(
            at(account(Some((10.0, 10 * MIN)), Some((95.0, 60 * MIN)))),
            spare(week, 95.0)
        );
        assert_eq!(
            at(account(Some((97.0, MIN)), Some((92.0, MIN)))),
            spare(five, 97.0)
        );
        // The week near its end, under-used.
        assert_eq!(
            at(account(Some((70.0, 90 * MIN)), Some((30.0, 20 * MIN)))),
            use_it(week, 30.0, 20 * MIN)
        );
        // A window whose reset passed says nothing; nor does an unknown account, or `enabled = false`.
        assert_eq!(at(account(Some((95.0, -MIN)), None)), Outlook::Plain);
        assert_eq!(outlook(&c, None, NOW, None), Outlook::Plain);
        let off = BudgetSettings {
            enabled: false,
            ..c.clone()
        };
        assert_eq!(
            outlook(&off, Some(&account(Some((95.0, MIN)), None)), NOW, None),
            Outlook::Plain
        );
        // A window without a reset can be spent but never "near its end".
        let mut no_reset = account(Some((40.0, MIN)), None);
        no_reset.five_hour.as_mut().unwrap().resets_at_ms = None;
        no_reset.five_hour.as_mut().unwrap().seen_ms = NOW;
        assert_eq!(at(no_reset.clone()), Outlook::Plain);
        no_reset.five_hour.as_mut().unwrap().used_percentage = 95.0;
        assert_eq!(at(no_reset), spare(five, 95.0));
    }

    #[test]
    fn a_window_near_its_end_is_owed_one_budget_nudge_and_the_next_window_its_own() {
        let c = config();
        let five = account(Some((40.0, 30 * MIN)), Some((30.0, 3 * 24 * 60 * MIN)));
        let at = |given: Option<i64>| outlook(&c, Some(&five), NOW, given);
        assert!(matches!(at(None), Outlook::UseIt(_)));
        // Given since the window came near (15 min ago), even with a reset read 10 min later.
        assert_eq!(at(Some(NOW - 5 * MIN)), Outlook::Plain);
        assert_eq!(at(Some(NOW - 24 * MIN)), Outlook::Plain);
        // Given for the window before: this one is owed its own.
        assert!(matches!(at(Some(NOW - 26 * MIN)), Outlook::UseIt(_)));
        // The 5-hour window had its nudge; the week nearing its end later is owed one too.
        let both = account(Some((40.0, 30 * MIN)), Some((30.0, 40 * MIN)));
        assert_eq!(
            outlook(&c, Some(&both), NOW, Some(NOW - 5 * MIN)),
            Outlook::Plain,
            "one nudge covers windows that end together"
        );
        let week_later = account(Some((40.0, 30 * MIN)), Some((30.0, 90 * MIN)));
        let later = NOW + 50 * MIN;
        assert!(matches!(
            outlook(&c, Some(&week_later), later, Some(NOW - 5 * MIN)),
            Outlook::UseIt(Unused {
                kind: WindowKind::SevenDay,
                ..
            })
        ));
    }

    #[test]
    fn the_text_says_what_is_left_and_when_it_resets() {
        let unused = Unused {
            kind: WindowKind::FiveHour,
            used: 38.4,
            resets_at_ms: NOW + 30 * MIN,
        };
        let text = nudge_text(&unused, NOW, &TimeZone::UTC);
        assert_eq!(
            text.as_str(),
            "Usage budget: 62% of the 5-hour window is still unused and it resets 08:30, in 30m; \
             unused it is lost. If there is useful work left, carry on with it now."
        );
    }

    #[test]
    fn shares_out_of_order_or_range_are_refused_with_the_keys_to_fix() {
        let mut s = crate::config::defaults().budget.clone();
        s.use_below = 95;
        let error = validate(&s).unwrap_err().to_string();
        assert!(
            error.contains("budget.use_below (95)") && error.contains("SPARE_FROM"),
            "{error}"
        );
        s.use_below = 50;
        s.spare_from = 101;
        assert!(validate(&s).is_err());
    }
}
