//! Claude Code's status-line JSON (what it pipes into `wakebridge statusline`), read into the
//! context monitor's [`Feed`]: the context figures, its account's usage windows and a used-up
//! limit.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::claude::home::account_of;
use crate::claude::limits;
use crate::claude::transcript::usage_from;
use crate::context::statusline::{Feed, FeedLimit};

/// Parses Claude Code's status-line JSON. `None` if it is not an object with a `session_id`.
pub fn parse_statusline(bytes: &[u8], now: u64) -> Option<Feed> {
    let v: Value = serde_json::from_slice(bytes.trim_ascii()).ok()?;
    let text = |at: &str| v.pointer(at).and_then(Value::as_str);
    let window = |name: &str| v.get("context_window").and_then(|c| c.get(name));
    Some(Feed {
        session_id: text("/session_id")?.to_owned(),
        model_id: text("/model/id").map(str::to_owned),
        used_percentage: window("used_percentage").and_then(Value::as_f64),
        current_usage: window("current_usage").and_then(usage_from),
        context_window_size: window("context_window_size")
            .and_then(Value::as_u64)
            .filter(|&w| w > 0),
        exceeds_200k_tokens: v.get("exceeds_200k_tokens").and_then(Value::as_bool),
        transcript_path: text("/transcript_path")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from),
        timestamp: now,
        budget: v.get("rate_limits").and_then(|r| {
            let transcript = text("/transcript_path").map(Path::new)?;
            let account = account_of(transcript)?;
            let now_ms = i64::try_from(now).ok()?.saturating_mul(1000);
            crate::budget::from_statusline(r, account, now_ms)
        }),
        limit: v.get("rate_limits").and_then(limits::in_statusline).map(
            |(notice, resets_at_ms)| FeedLimit {
                kind: notice.kind,
                resets_at_ms,
            },
        ),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::clock::now_ms;
    use crate::context::statusline::{Activity, read_feed_at, render_line, write_feed};

    const AFTER_RESPONSE: &str = r#"{"session_id":"ac3ea6be-3f07-449d-ba6d-fe455f4016dc","transcript_path":"/h/.claude/projects/-p/ac3ea6be-3f07-449d-ba6d-fe455f4016dc.jsonl","model":{"id":"claude-opus-5-5","display_name":"Opus 5.5"},"context_window":{"total_input_tokens":420000,"total_output_tokens":10,"context_window_size":1000000,"current_usage":{"input_tokens":10,"output_tokens":5,"cache_creation_input_tokens":19990,"cache_read_input_tokens":400000},"used_percentage":42,"remaining_percentage":58},"exceeds_200k_tokens":true}"#;

    #[test]
    fn parses_payload_after_a_response() {
        let feed = parse_statusline(AFTER_RESPONSE.as_bytes(), 100);
        let feed = feed.as_ref();
        assert_eq!(feed.and_then(Feed::used_tokens), Some(420_000));
        assert_eq!(feed.and_then(Feed::percent), Some(42.0));
        assert_eq!(
            feed.and_then(|f| f.model_id.as_deref()),
            Some("claude-opus-5-5")
        );
        assert_eq!(render_line(feed, Some(Activity::Idle)), "ctx 42% · idle");
    }

    #[test]
    fn a_used_up_rate_limit_window_is_kept_and_shown() {
        let resets_s = now_ms() / 1000 + 2 * 3600 + 30;
        let payload = AFTER_RESPONSE.replace(
            r#""exceeds_200k_tokens":true"#,
            &format!(
                r#""exceeds_200k_tokens":true,"rate_limits":{{"five_hour":{{"used_percentage":100,"resets_at":{resets_s}}}}}"#
            ),
        );
        let feed = parse_statusline(payload.as_bytes(), 100);
        let limit = feed.as_ref().and_then(|f| f.limit.clone());
        assert_eq!(
            limit,
            Some(FeedLimit {
                kind: "5-hour limit".into(),
                resets_at_ms: Some(resets_s * 1000),
            })
        );
        let line = render_line(feed.as_ref(), Some(Activity::Idle));
        assert!(
            line.starts_with("ctx 42% · idle · 5-hour limit hit, resets "),
            "{line}"
        );
        assert!(line.ends_with(", in 2h 0m"), "{line}");
        // A window not used up says nothing.
        assert_eq!(
            parse_statusline(AFTER_RESPONSE.as_bytes(), 1).and_then(|f| f.limit),
            None
        );
    }

    #[test]
    fn payload_before_first_response_is_unknown() {
        let before = r#"{"session_id":"s1","model":{"id":"m"},"context_window":{"context_window_size":1000000,"current_usage":null,"used_percentage":null}}"#;
        let feed = parse_statusline(before.as_bytes(), 1);
        assert_eq!(
            feed.as_ref().and_then(|f| f.context_window_size),
            Some(1_000_000)
        );
        assert_eq!(render_line(feed.as_ref(), None), "ctx ?");
    }

    #[test]
    fn garbage_gives_unknown_line() {
        for input in [
            &b""[..],
            b"not json",
            b"{}",
            b"[1,2]",
            b"\xff\xfe",
            b"{\"session_id\":7}",
        ] {
            let feed = parse_statusline(input, 1);
            assert_eq!(render_line(feed.as_ref(), None), "ctx ?");
        }
    }

    #[test]
    fn feed_round_trips_and_goes_stale() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let feed = parse_statusline(AFTER_RESPONSE.as_bytes(), 1_000).ok_or("no feed")?;
        write_feed(dir.path(), &feed)?;
        let sid = feed.session_id.as_str();
        let max_age = Duration::from_secs(60);
        assert_eq!(
            read_feed_at(dir.path(), sid, max_age, 1_030),
            Some(feed.clone())
        );
        assert_eq!(read_feed_at(dir.path(), sid, max_age, 1_061), None);
        assert_eq!(read_feed_at(dir.path(), "other", max_age, 1_030), None);
        Ok(())
    }
}
