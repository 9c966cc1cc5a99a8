//! How full a Codex session's context is and whether it hit a usage limit, from its rollout
//! (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread>.jsonl`, the transcript its hooks
//! name), pure. Lines are `{timestamp, ordinal, type, payload}`; after each model response an
//! `event_msg` of `payload.type` `token_count` carries the response's usage
//! (`info.last_token_usage.total_tokens` is what the context now holds, as Codex's own footer
//! counts it), the window it counts against (`info.model_context_window`), and the account's
//! windows (`rate_limits.primary` the 5-hour one, `secondary` the week: `used_percent`,
//! `window_minutes`, `resets_at` in unix seconds). At a usage limit Codex answers 429 and writes
//! the windows with one at 100 %; it never resumes by itself. `turn_context` names the model.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::reading::limit::{Notice, TranscriptNotice};
use crate::reading::transcript::{ContextReading, LineReading, Turn, UsageSource, UsageWindows};

/// Cheap pre-filter: a line with neither is not parsed.
const NEEDLES: [&str; 2] = ["token_count", "turn_context"];

/// A usage window at this share is used up.
const USED_UP_PERCENT: f64 = 100.0;

/// One rollout line, as the context tracker reads it.
pub fn read_line(line: &[u8]) -> Option<LineReading> {
    let text = std::str::from_utf8(line.trim_ascii()).ok()?;
    if !NEEDLES.iter().any(|n| text.contains(n)) {
        return None;
    }
    let record: Value = serde_json::from_str(text).ok()?;
    let payload = &record["payload"];
    match (record["type"].as_str(), payload["type"].as_str()) {
        (Some("turn_context"), _) => Some(LineReading {
            model: Some(payload["model"].as_str()?.to_owned()),
            ..LineReading::default()
        }),
        (Some("event_msg"), Some("token_count")) => {
            let (limits, info) = (&payload["rate_limits"], &payload["info"]);
            let limit = used_up(limits, &record["timestamp"]);
            let usage = (info["last_token_usage"]["total_tokens"].as_u64()).map(|used_tokens| {
                ContextReading {
                    used_tokens,
                    model: None,
                    source: UsageSource::Assistant,
                    window: info["model_context_window"].as_u64().filter(|w| *w > 0),
                }
            });
            Some(LineReading {
                usage,
                // A count under every window is a response (or the windows' reset): a limit
                // before it has lifted.
                answered: limit.is_none(),
                limit,
                windows: windows(limits),
                ..LineReading::default()
            })
        }
        _ => None,
    }
}

/// The Codex home a rollout at `path` belongs to: `<home>/sessions/YYYY/MM/DD/<file>`.
pub fn home_of(path: &Path) -> Option<PathBuf> {
    let sessions = path.ancestors().nth(4)?;
    (sessions.file_name()? == "sessions").then(|| sessions.parent().map(Path::to_owned))?
}

/// The 5-hour (`primary`) and weekly (`secondary`) windows of `rate_limits`.
fn windows(limits: &Value) -> Option<UsageWindows> {
    let window = |key: &str| {
        let used = limits[key]["used_percent"]
            .as_f64()
            .filter(|u| u.is_finite())?;
        let resets_ms = limits[key]["resets_at"]
            .as_i64()
            .map(|s| s.saturating_mul(1000));
        Some((used.clamp(0.0, 100.0), resets_ms))
    };
    let windows = UsageWindows {
        five_hour: window("primary"),
        seven_day: window("secondary"),
    };
    (windows.five_hour.is_some() || windows.seven_day.is_some()).then_some(windows)
}

/// The window `rate_limits` says is used up (the one that resets last when both are), as a
/// limit notice with its exact reset.
fn used_up(limits: &Value, timestamp: &Value) -> Option<TranscriptNotice> {
    let windows = [("primary", "5-hour limit"), ("secondary", "weekly limit")];
    let (key, kind) = windows
        .into_iter()
        .filter(|(key, _)| limits[key]["used_percent"].as_f64() >= Some(USED_UP_PERCENT))
        .max_by_key(|(key, _)| limits[key]["resets_at"].as_i64())?;
    let at_ms = (timestamp.as_str())
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map(jiff::Timestamp::as_millisecond);
    Some(TranscriptNotice {
        notice: Notice {
            kind: kind.to_owned(),
            resets: None,
        },
        at_ms,
        resets_at_ms: limits[key]["resets_at"]
            .as_i64()
            .map(|s| s.saturating_mul(1000)),
    })
}

/// How far back from the end a turn is looked for (as for Claude Code's transcript).
pub const TURN_TAIL_BYTES: u64 = 4 * 1024 * 1024;

/// The newest turn in `tail`, read back from the end to its `task_started`: the person's (or
/// wakebridge's) text that started it, the tokens of every response in it (each `token_count`'s
/// `last_token_usage.total_tokens`) and its tool calls. `None` when no turn starts in the tail.
pub fn last_turn(tail: &[u8]) -> Option<Turn> {
    let (mut tokens, mut tools, mut prompt) = (0u64, 0u32, None);
    let records = tail
        .rsplit(|&b| b == b'\n')
        .filter_map(|line| serde_json::from_slice::<Value>(line.trim_ascii()).ok());
    for record in records {
        let payload = &record["payload"];
        match (record["type"].as_str(), payload["type"].as_str()) {
            (Some("event_msg"), Some("token_count")) => {
                let used = &payload["info"]["last_token_usage"]["total_tokens"];
                tokens = tokens.saturating_add(used.as_u64().unwrap_or(0));
            }
            (Some("response_item"), Some("function_call" | "custom_tool_call")) => tools += 1,
            // Going back, the turn's first text is the last one met.
            (Some("event_msg"), Some("item_completed"))
                if payload["item"]["type"] == "UserMessage" =>
            {
                let texts = payload["item"]["content"].as_array()?.iter();
                let text: Vec<&str> = texts.filter_map(|c| c["text"].as_str()).collect();
                prompt = Some(text.concat());
            }
            (Some("event_msg"), Some("task_started")) => {
                return Some(Turn {
                    prompt_id: payload["turn_id"].as_str()?.to_owned(),
                    prompt: prompt?,
                    tokens,
                    tools,
                });
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_turn_of_a_real_rollout_with_its_tokens_and_tool_calls() {
        let rollout = include_str!("../../tests/fixtures/codex/rollout-turns.jsonl");
        let turn = last_turn(rollout.as_bytes()).expect("a turn");
        assert_eq!(turn.prompt_id, "01a24f2c-7abc-7b43-ad76-2094819ca160");
        assert_eq!(turn.prompt, "askuser please");
        // Two responses (the tool call, then the answer): 1,290 tokens each.
        assert_eq!((turn.tokens, turn.tools), (2_580, 1));
        // Cut before the last turn: the one before it, which made no call.
        let earlier = &rollout[..rollout.rfind("\"task_started\"").unwrap()];
        let earlier = &earlier[..earlier.rfind('\n').unwrap()];
        let turn = last_turn(earlier.as_bytes()).expect("the turn before");
        assert_eq!(turn.tools, 0);
        assert_ne!(turn.prompt_id, "01a24f2c-7abc-7b43-ad76-2094819ca160");
        // A tail that starts inside a turn has none.
        let inside = &rollout[rollout.rfind("\"task_started\"").unwrap() + 20..];
        assert_eq!(last_turn(inside.as_bytes()), None);
    }
    use crate::reading::transcript::ContextTracker;

    /// A `token_count` line as Codex 0.171.0 writes it.
    fn token_count(total: u64, primary: f64, secondary: f64) -> String {
        format!(
            r#"{{"timestamp":"2026-12-07T03:43:35.343Z","ordinal":12,"type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{{"input_tokens":9,"total_tokens":9}},"last_token_usage":{{"input_tokens":1234,"cached_input_tokens":200,"cache_write_input_tokens":0,"output_tokens":56,"reasoning_output_tokens":7,"total_tokens":{total}}},"last_usage_includes_reasoning":false,"model_context_window":258400}},"rate_limits":{{"limit_id":"codex","primary":{{"used_percent":{primary},"window_minutes":300,"resets_at":1796618615}},"secondary":{{"used_percent":{secondary},"window_minutes":10080,"resets_at":1796701415}},"rate_limit_reached_type":null}}}}}}"#
        )
    }

    const TURN: &str = r#"{"timestamp":"2026-12-07T03:43:25.723Z","ordinal":5,"type":"turn_context","payload":{"turn_id":"t","cwd":"/w","model":"gpt-9-codex"}}"#;

    #[test]
    fn the_context_is_the_last_response_s_total_against_codex_s_own_window() {
        let mut tracker = ContextTracker::reading_with(read_line);
        tracker.feed_line(TURN.as_bytes(), 0);
        tracker.feed_line(token_count(129_200, 12.5, 40.0).as_bytes(), 10);
        let reading = tracker.current().expect("a reading");
        assert_eq!(reading.used_tokens, 129_200);
        assert_eq!(reading.window, Some(258_400));
        assert_eq!(reading.model.as_deref(), Some("gpt-9-codex"));
        assert!(tracker.limit().is_none());
        let windows = tracker.windows().expect("the account's windows");
        assert_eq!(windows.five_hour, Some((12.5, Some(1_796_618_615_000))));
        assert_eq!(windows.seven_day, Some((40.0, Some(1_796_701_415_000))));
    }

    #[test]
    fn a_used_up_window_is_a_limit_until_a_response_under_it() {
        let mut tracker = ContextTracker::reading_with(read_line);
        tracker.feed_line(token_count(1290, 100.0, 40.0).as_bytes(), 7);
        let limit = tracker.limit().expect("a limit").clone();
        assert_eq!(limit.offset, 7);
        assert_eq!(limit.found.notice.kind, "5-hour limit");
        assert_eq!(limit.found.resets_at_ms, Some(1_796_618_615_000));
        assert_eq!(limit.found.at_ms, Some(1_796_615_015_343));
        let both = read_line(token_count(1290, 100.0, 100.0).as_bytes());
        let week = both.and_then(|said| said.limit).expect("a limit");
        assert_eq!(
            week.notice.kind, "weekly limit",
            "the later reset holds longer"
        );
        tracker.feed_line(token_count(1290, 3.0, 41.0).as_bytes(), 20);
        assert!(tracker.limit().is_none());
    }

    #[test]
    fn a_rollout_belongs_to_the_home_it_is_under() {
        let path = Path::new("/h/.codex/sessions/2026/12/07/rollout-2026-12-07T03-43-20-x.jsonl");
        assert_eq!(home_of(path), Some(PathBuf::from("/h/.codex")));
        assert_eq!(
            home_of(Path::new("/h/.codex/elsewhere/a/b/c/r.jsonl")),
            None
        );
        assert_eq!(home_of(Path::new("/r.jsonl")), None);
    }

    #[test]
    fn other_lines_and_garbage_say_nothing() {
        for line in [
            &br#"{"type":"response_item","payload":{"type":"message","role":"assistant"}}"#[..],
            br#"{"type":"event_msg","payload":{"type":"task_started"}}"#,
            b"token_count but not json",
            br#"{"type":"turn_context","payload":{}}"#,
            b"",
        ] {
            assert_eq!(read_line(line), None);
        }
        let no_info =
            r#"{"type":"event_msg","payload":{"type":"token_count","info":null,"rate_limits":{}}}"#;
        let said = read_line(no_info.as_bytes()).expect("a count");
        assert!(said.answered && said.usage.is_none() && said.windows.is_none());
    }
}
