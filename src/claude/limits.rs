//! Claude Code's usage limits, read the same way from every signal: the notice it prints
//! (`You've hit your session limit · resets 3pm (Europe/London)`) on screen, in a transcript or
//! a `StopFailure` hook; the status line's `rate_limits`; the limit menu; the reset in every
//! form it is written (read by `reading::limit`). Warnings (`You've used 90% …`) and a bare 429
//! are not limits. Pure.

use jiff::Timestamp;
use serde_json::Value;

use super::screen::{self, CURSOR};
use crate::reading::limit::{Notice, TranscriptNotice, reset_ms};

/// How a notice opens (after [`screen::normalize`]: a plain apostrophe).
const NOTICE_OPENINGS: &[&str] = &["You've hit your ", "You've reached your "];
/// The older form: `5-hour limit reached ∙ resets 3pm`.
const REACHED: &str = " limit reached";
/// What Claude Code draws in front of a message line: the result glyph and the reply bullet.
const MESSAGE_GLYPHS: &[char] = &['\u{23bf}', '\u{25cf}'];
/// Lines Claude Code draws under a notice as part of it (2.1.332), not a reply after it.
const NOTICE_FOLLOWERS: &[&str] = &["Usage limit reached"];
/// Claude Code's own auto-continue footer, lower-cased: `Continuing automatically at 8:39pm ·
/// Esc to cancel`, `Continuing shortly · Esc to cancel`; and once the reset passed without it.
const AUTO_CONTINUE_FOOTER: &str = "continuing ";
const AUTO_CONTINUE_CANCEL: &str = "esc to cancel";
const AUTO_CONTINUE_STALE: &str = "your usage limit has reset";
/// Limits whose notice names no reset (the spend cap; an organisation's monthly limit).
const NO_RESET_KINDS: &[&str] = &["spend limit", "monthly"];
/// What separates the kind from the reset in a notice (U+00B7, or U+2219 in the older form).
const SEPARATORS: &[char] = &['\u{b7}', '\u{2219}'];
/// The limit menu's option that waits for the reset.
pub const WAIT_OPTION: &str = "Stop and wait for limit to reset";
/// The status line's windows, as the kind a notice would name.
const STATUSLINE_WINDOWS: &[(&str, &str)] =
    &[("five_hour", "5-hour limit"), ("seven_day", "weekly limit")];

/// The notice a line or message starts with (after `⎿` or `●`), if it names a reset or is a limit
/// that gives none: an agent's sentence saying "you've hit your rate limit" is no notice.
pub fn notice(text: &str) -> Option<Notice> {
    let text = screen::normalize(text);
    let text = text.trim_start_matches(|c: char| c.is_whitespace() || MESSAGE_GLYPHS.contains(&c));
    if let Some(rest) = NOTICE_OPENINGS.iter().find_map(|o| text.strip_prefix(o)) {
        let (kind, resets) = match rest.split_once(SEPARATORS) {
            Some((kind, after)) => (kind, resets_part(after)),
            None => (rest.trim_end_matches(['.', ' ']), None),
        };
        let kind = kind.trim();
        let without_reset = NO_RESET_KINDS.iter().any(|k| kind.contains(k));
        return (kind.ends_with("limit") && (resets.is_some() || without_reset)).then(|| Notice {
            kind: kind.to_owned(),
            resets,
        });
    }
    // The older form: one word, then ` limit reached ∙ resets …`.
    let (word, rest) = text.split_once(REACHED)?;
    let resets = rest
        .split_once(SEPARATORS)
        .and_then(|(_, after)| resets_part(after))?;
    (!word.is_empty() && !word.contains(char::is_whitespace)).then(|| Notice {
        kind: format!("{word} limit"),
        resets: Some(resets),
    })
}

/// `resets 3pm (Europe/London) · /upgrade …` → `3pm (Europe/London)`.
fn resets_part(after: &str) -> Option<String> {
    let reset = after.trim_start().strip_prefix("resets ")?;
    let reset = reset.split(SEPARATORS).next()?.trim();
    (!reset.is_empty()).then(|| reset.to_owned())
}

/// The notice that is the screen's latest word: the last one above the input box with no
/// message after it (a `●` reply, or a prompt the agent took, `❯ continue`).
pub fn on_screen(text: &str) -> Option<Notice> {
    let normalized = screen::normalize(text);
    let lines: Vec<&str> = normalized.lines().map(str::trim_end).collect();
    let end = screen::input_box_start(&lines);
    let (at, found) = lines[..end]
        .iter()
        .enumerate()
        .rev()
        .find_map(|(at, line)| notice(line).map(|n| (at, n)))?;
    let later_message = lines[at + 1..end].iter().any(|line| {
        let t = line.trim_start();
        let text = t.trim_start_matches(|c: char| c.is_whitespace() || MESSAGE_GLYPHS.contains(&c));
        if NOTICE_FOLLOWERS.iter().any(|f| text.starts_with(f)) {
            return false;
        }
        t.starts_with('●')
            || t.strip_prefix(CURSOR)
                .or_else(|| t.strip_prefix('>'))
                .is_some_and(|rest| {
                    let rest = rest.trim_start();
                    !rest.is_empty() && !rest.starts_with(|c: char| c.is_ascii_digit())
                })
    });
    (!later_message).then_some(found)
}

/// Whether Claude Code's own auto-continue at a usage limit is armed: it continues the session by
/// itself at the reset. Its footer says so, unless a line above says the reset passed without it.
pub fn auto_continue_armed(screen: &str) -> bool {
    screen
        .lines()
        .map(|line| line.trim().to_lowercase())
        .find(|line| is_auto_continue_footer(line) || line.contains(AUTO_CONTINUE_STALE))
        .is_some_and(|line| is_auto_continue_footer(&line))
}

fn is_auto_continue_footer(lower: &str) -> bool {
    lower.starts_with(AUTO_CONTINUE_FOOTER) && lower.contains(AUTO_CONTINUE_CANCEL)
}

/// `screen` without the auto-continue footer: its "Esc to cancel" reads as a dialog, but the
/// prompt above it takes keys as always, so it must not hold back a resume.
pub fn without_auto_continue(screen: &str) -> String {
    screen
        .lines()
        .filter(|line| !is_auto_continue_footer(&line.trim().to_lowercase()))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// The number of the limit menu's wait option, by its label, if the menu is on the screen.
pub fn wait_option(text: &str) -> Option<u8> {
    let text = screen::normalize(text);
    let lines: Vec<&str> = text.lines().collect();
    if !screen::cursor_on_option(&lines) {
        return None;
    }
    lines.iter().find_map(|line| {
        let label = screen::option_label(line);
        let (number, rest) = label.split_once(['.', ')'])?;
        (rest.trim() == WAIT_OPTION).then(|| number.parse().ok())?
    })
}

/// The notice of a main-chain API-error record of a rate limit (429 or `error: "rate_limit"`)
/// whose text is a limit notice; a 429 without one (an overloaded retry) is not a limit.
pub fn in_transcript_line(line: &[u8]) -> Option<TranscriptNotice> {
    // Cheap pre-filter: nearly every line is not an API error.
    if !line.windows(17).any(|w| w == b"isApiErrorMessage") {
        return None;
    }
    let record: Value = serde_json::from_slice(line).ok()?;
    let is_error = record.get("isApiErrorMessage") == Some(&Value::Bool(true));
    let sidechain = record.get("isSidechain") == Some(&Value::Bool(true));
    let rate_limited = record.get("apiErrorStatus").and_then(Value::as_u64) == Some(429)
        || record.get("error").and_then(Value::as_str) == Some("rate_limit");
    if !is_error || sidechain || !rate_limited {
        return None;
    }
    let notice = match record.pointer("/message/content")? {
        Value::String(text) => notice(text),
        Value::Array(blocks) => (blocks.iter())
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .find_map(notice),
        _ => None,
    }?;
    let at_ms = record
        .get("timestamp")
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<Timestamp>().ok())
        .map(Timestamp::as_millisecond);
    let resets_at_ms = [
        "/quotaLimits/resetsAt",
        "/apiErrorParams/rate_limit_info/resetsAt",
    ]
    .iter()
    .find_map(|at| record.pointer(at).and_then(Value::as_i64))
    .and_then(|s| s.checked_mul(1000));
    Some(TranscriptNotice {
        notice,
        at_ms,
        resets_at_ms,
    })
}

/// The notice of a `StopFailure` hook (`error: "rate_limit"`).
pub fn in_stop_failure(error: Option<&str>, last_message: Option<&str>) -> Option<Notice> {
    (error == Some("rate_limit")).then(|| last_message.and_then(notice))?
}

/// A used-up window of the status line's `rate_limits`, with its reset in unix ms.
pub fn in_statusline(rate_limits: &Value) -> Option<(Notice, Option<i64>)> {
    STATUSLINE_WINDOWS.iter().find_map(|(key, kind)| {
        let window = rate_limits.get(key)?;
        let used = window.get("used_percentage").and_then(Value::as_f64)?;
        if used < 100.0 {
            return None;
        }
        let resets_at = window.get("resets_at").and_then(reset_ms);
        let kind = (*kind).to_owned();
        Some((Notice { kind, resets: None }, resets_at))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Unix ms of an RFC 3339 time.
    fn ms(text: &str) -> i64 {
        text.parse::<Timestamp>().unwrap().as_millisecond()
    }

    #[test]
    fn notices_in_every_form_claude_code_writes_them() {
        // The strings of the 2.1.197 binary: `You've hit your ${kind}${" · resets " + when}`.
        let cases = [
            (
                "You've hit your session limit · resets 3pm (Europe/London)",
                "session limit",
                Some("3pm (Europe/London)"),
            ),
            (
                "  ⎿  You\u{2019}ve hit your weekly limit · resets Dec 3, 3:45pm",
                "weekly limit",
                Some("Dec 3, 3:45pm"),
            ),
            (
                "You've hit your Opus limit · resets 15:00",
                "Opus limit",
                Some("15:00"),
            ),
            (
                "You've hit your fast limit · resets in 2h 5m",
                "fast limit",
                Some("in 2h 5m"),
            ),
            (
                "You've hit your monthly spend limit.",
                "monthly spend limit",
                None,
            ),
            (
                "You've reached your org's monthly usage limit · resets Jan 1, 2027, 12am (UTC) · contact your admin",
                "org's monthly usage limit",
                Some("Jan 1, 2027, 12am (UTC)"),
            ),
            (
                "5-hour limit reached ∙ resets 3pm",
                "5-hour limit",
                Some("3pm"),
            ),
        ];
        for (text, kind, resets) in cases {
            let found = notice(text).unwrap_or_else(|| panic!("no notice in {text:?}"));
            assert_eq!(found.kind, kind, "{text}");
            assert_eq!(found.resets.as_deref(), resets, "{text}");
        }
    }

    #[test]
    fn warnings_and_other_text_are_not_limits() {
        for text in [
            // An agent's own words, even at a line's start, name no reset.
            "You've hit your API rate limit.",
            "The connection pool limit reached 100 in the load test",
            "● I think you've hit your session limit · resets 3pm",
            "  so the worker limit reached · resets nothing",
            "You've used 90% of your session limit · resets 3pm",
            "Approaching usage limit · resets 3pm",
            "You've hit your stride today",
            "API Error: 429 rate_limit_error: Overloaded",
            "",
        ] {
            assert_eq!(notice(text), None, "{text}");
        }
    }

    #[test]
    fn only_the_screens_latest_word_is_a_limit() {
        let limited = "● Working on it\n\
                       ⎿  You've hit your session limit · resets 3pm (UTC)\n\
                       \n\
                       ─────────────\n\
                       ❯ \n\
                       ─────────────\n";
        assert_eq!(
            on_screen(limited).map(|n| n.kind),
            Some("session limit".into())
        );
        // Claude Code 2.1.332 at a real 5-hour limit (its own auto-continue on), as captured.
        let real = "❯ hello\n\
                    \u{20} ⎿  You've hit your 5-hour limit · resets 8:39pm (UTC)\n\
                    ● Usage limit reached · set to continue automatically at 8:39pm\n\
                    ─────────────\n\
                    ❯ \n\
                    ─────────────\n\
                    \u{20} ⚠ Usage limit reached · limit resets 8:39pm\n\
                    \u{20}   Continuing automatically at 8:39pm · Esc to cancel\n";
        let found = on_screen(real).expect("the real notice");
        assert_eq!(found.kind, "5-hour limit");
        assert_eq!(found.resets.as_deref(), Some("8:39pm (UTC)"));
        // Its auto-continue footer reads as a dialog; without it, the screen is the prompt's.
        assert!(screen::read(real).modal.is_some());
        assert_eq!(screen::read(&without_auto_continue(real)).modal, None);
        assert!(auto_continue_armed(real));
        // From the reset until it fires, 2.1.332 says "shortly": still armed, still no dialog.
        let shortly = real.replace("Continuing automatically at 8:39pm", "Continuing shortly");
        assert!(auto_continue_armed(&shortly));
        assert_eq!(screen::read(&without_auto_continue(&shortly)).modal, None);
        let without_time = real.replace("at 8:39pm · Esc", "when it resets · Esc");
        assert!(auto_continue_armed(&without_time));
        let stale = "❯ \n─────────────\n  Your usage limit has reset\n  Press enter to continue\n";
        assert!(!auto_continue_armed(stale));
        // A footer left under the line saying the reset passed is armed no more.
        assert!(!auto_continue_armed(&format!(
            "{stale}{}",
            real.lines().last().unwrap()
        )));
        assert!(!auto_continue_armed(limited));
        // A permission dialog's "Esc to cancel" is no auto-continue and stays a dialog.
        let dialog = "Do you want to proceed?\n❯ 1. Yes\n  2. No\nEsc to cancel\n";
        assert!(!auto_continue_armed(dialog));
        assert!(screen::read(&without_auto_continue(dialog)).modal.is_some());
        let resumed = "⎿  You've hit your session limit · resets 3pm (UTC)\n\
                       ❯ continue\n\
                       ● Picking up where I left off\n\
                       ─────────────\n\
                       ❯ \n\
                       ─────────────\n";
        assert_eq!(on_screen(resumed), None);
        let menu = "⎿  You've hit your session limit · resets 3pm\n\
                    What do you want to do?\n\
                    ❯ 1. Stop and wait for limit to reset\n\
                    \u{20}\u{20}2. Upgrade your plan\n";
        assert!(on_screen(menu).is_some());
        assert_eq!(wait_option(menu), Some(1));
        let last = "  1. Upgrade your plan\n❯ 2. Stop and wait for limit to reset\n";
        assert_eq!(wait_option(last), Some(2));
        assert_eq!(wait_option("❯ 1. Yes\n  2. No\n"), None);
        // The words in plain output, with no menu cursor, are not a menu.
        assert_eq!(wait_option("  1. Stop and wait for limit to reset\n"), None);
        // A menu of one option still is.
        assert_eq!(
            wait_option("❯ 1. Stop and wait for limit to reset\n"),
            Some(1)
        );
    }

    #[test]
    fn transcript_records_of_a_limit_and_of_a_transient_429() {
        let limit = json!({
            "type": "assistant", "isApiErrorMessage": true, "apiErrorStatus": 429,
            "timestamp": "2026-12-01T13:00:00.000Z",
            "error": "rate_limit",
            "message": {"model": "<synthetic>", "role": "assistant",
                        "content": [{"type": "text", "text": "You've hit your session limit · resets 3pm"}]}
        });
        let line = serde_json::to_vec(&limit).unwrap();
        let found = in_transcript_line(&line).unwrap();
        assert_eq!(found.notice.resets.as_deref(), Some("3pm"));
        assert_eq!(found.at_ms, Some(ms("2026-12-01T13:00:00Z")));
        assert_eq!(found.resets_at_ms, None);
        // 2.1.332 writes the exact reset too (the fields as it wrote them at a real limit).
        let exact = json!({
            "type": "assistant", "isApiErrorMessage": true, "apiErrorStatus": 429,
            "error": "rate_limit", "apiError": "usage_limit_reached",
            "quotaLimits": {"status": "rejected", "resetsAt": 1_796_157_575, "rateLimitType": "five_hour"},
            "message": {"content": [{"type": "text", "text": "You've hit your 5-hour limit · resets 8:39pm (UTC)"}]}
        });
        let found = in_transcript_line(&serde_json::to_vec(&exact).unwrap()).unwrap();
        assert_eq!(found.resets_at_ms, Some(1_796_157_575_000));
        // An API-key account's 429, as 2.1.332 wrote it: no notice, not a limit.
        let api_key = json!({"isApiErrorMessage": true, "apiErrorStatus": 429, "error": "rate_limit",
            "message": {"content": [{"type": "text", "text": "API Error: Request rejected (429) · This request would exceed your account's rate limit. Please try again later."}]}});
        assert_eq!(
            in_transcript_line(&serde_json::to_vec(&api_key).unwrap()),
            None
        );
        let transient = json!({
            "type": "assistant", "isApiErrorMessage": true, "apiErrorStatus": 429,
            "message": {"content": [{"type": "text", "text": "API Error: Repeated 529 Overloaded errors"}]}
        });
        assert_eq!(
            in_transcript_line(&serde_json::to_vec(&transient).unwrap()),
            None
        );
        let sidechain = json!({"isApiErrorMessage": true, "isSidechain": true, "error": "rate_limit",
            "message": {"content": "You've hit your session limit · resets 3pm"}});
        assert_eq!(
            in_transcript_line(&serde_json::to_vec(&sidechain).unwrap()),
            None
        );
        assert_eq!(in_transcript_line(b"{\"type\":\"user\"}"), None);
        assert_eq!(in_transcript_line(b"isApiErrorMessage not json"), None);
    }

    #[test]
    fn stop_failure_and_status_line_feeds() {
        let text = "You've hit your weekly limit · resets Dec 3, 3pm";
        assert!(in_stop_failure(Some("rate_limit"), Some(text)).is_some());
        assert_eq!(in_stop_failure(Some("server_error"), Some(text)), None);
        assert_eq!(
            in_stop_failure(Some("rate_limit"), Some("API Error: 429")),
            None
        );

        let feed = json!({"five_hour": {"used_percentage": 42.0, "resets_at": 1_800_000_000},
                          "seven_day": {"used_percentage": 100, "resets_at": 1_800_000_000}});
        let (notice, resets) = in_statusline(&feed).unwrap();
        assert_eq!(notice.kind, "weekly limit");
        assert_eq!(resets, Some(1_800_000_000_000));
        let iso =
            json!({"five_hour": {"used_percentage": 100.0, "resets_at": "2026-12-01T15:00:00Z"}});
        assert_eq!(
            in_statusline(&iso).unwrap().1,
            Some(ms("2026-12-01T15:00:00Z"))
        );
        assert_eq!(
            in_statusline(&json!({"five_hour": {"used_percentage": 99.9}})),
            None
        );
    }
}
