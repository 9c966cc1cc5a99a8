//! How full Claude Code's JSONL transcript records say the context window is, pure. The newest
//! main-chain `assistant` record with real usage decides (input plus cache tokens, output
//! excluded, as Claude Code does); a newer main-chain `system/compact_boundary` resets the
//! figure to `compactMetadata.postTokens`. Only the newest record counts, so streaming
//! duplicates need no handling and one `reading::transcript::ContextTracker` works over a file,
//! a tail or appends.

use serde::Deserialize;
use serde_json::Value;

use super::limits;
use crate::reading::transcript::{ContextReading, LineReading, Usage, UsageSource};

/// The model string Claude Code writes on records it invents itself (API errors, interrupts);
/// their usage is all zeros and says nothing about the context.
pub const SYNTHETIC_MODEL: &str = "<synthetic>";

/// Cheap pre-filter: a line with neither is skipped without a JSON parse.
const INTERESTING_NEEDLES: [&str; 2] = ["assistant", "compact_boundary"];

/// The envelope fields we read: `Value` leaves, so a surprising type loses one field, not the
/// record; a typed `message`, so its (possibly huge) `content` is skipped without being built.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawRecord {
    #[serde(rename = "type")]
    kind: Option<Value>,
    subtype: Option<Value>,
    is_sidechain: Option<Value>,
    is_api_error_message: Option<Value>,
    compact_metadata: Option<Value>,
    message: Option<RawMessage>,
}

#[derive(Deserialize)]
struct RawMessage {
    model: Option<Value>,
    usage: Option<Value>,
}

fn as_flag(value: Option<&Value>) -> bool {
    matches!(value, Some(Value::Bool(true)))
}

/// The usage in a `message.usage` or status-line `current_usage` object.
pub fn usage_from(value: &Value) -> Option<Usage> {
    let count = |key: &str| value.get(key).and_then(Value::as_u64);
    Some(Usage {
        input_tokens: count("input_tokens")?,
        output_tokens: count("output_tokens").unwrap_or(0),
        cache_creation_input_tokens: count("cache_creation_input_tokens").unwrap_or(0),
        cache_read_input_tokens: count("cache_read_input_tokens").unwrap_or(0),
    })
}

/// What one transcript line says about the context: the tokens in it, the model (an assistant
/// record's) and the kind of record. `None` for anything else, and for a record that may not
/// decide: a sidechain's, an API error, a synthetic record, one without real usage.
fn parse_record(line: &[u8]) -> Option<(u64, Option<String>, UsageSource)> {
    let line = line.trim_ascii();
    if line.first() != Some(&b'{') {
        return None;
    }
    let text = std::str::from_utf8(line).ok()?;
    if !INTERESTING_NEEDLES.iter().any(|n| text.contains(n)) {
        return None;
    }
    let raw: RawRecord = serde_json::from_str(text).ok()?;
    if as_flag(raw.is_sidechain.as_ref()) {
        return None;
    }
    match raw.kind.as_ref().and_then(Value::as_str) {
        Some("assistant") => {
            let message = raw.message?;
            let model = message.model.as_ref().and_then(Value::as_str);
            let usage = message.usage.as_ref().and_then(usage_from)?;
            let synthetic = model == Some(SYNTHETIC_MODEL);
            if synthetic || as_flag(raw.is_api_error_message.as_ref()) {
                return None;
            }
            let model = model.map(str::to_owned);
            Some((usage.context_tokens(), model, UsageSource::Assistant))
        }
        Some("system")
            if raw.subtype.as_ref().and_then(Value::as_str) == Some("compact_boundary") =>
        {
            let post_tokens =
                (raw.compact_metadata.as_ref()).and_then(|m| m.get("postTokens")?.as_u64());
            Some((post_tokens.unwrap_or(0), None, UsageSource::CompactBoundary))
        }
        _ => None,
    }
}

/// Claude Code's transcript line: a limit notice, else an assistant record's usage or a
/// compaction's figure.
pub fn read_line(line: &[u8]) -> Option<LineReading> {
    if let Some(found) = limits::in_transcript_line(line) {
        return Some(LineReading {
            limit: Some(found),
            ..LineReading::default()
        });
    }
    let (used_tokens, model, source) = parse_record(line)?;
    let usage = ContextReading {
        used_tokens,
        model,
        source,
        window: None,
    };
    Some(LineReading {
        usage: Some(usage),
        answered: source == UsageSource::Assistant,
        ..LineReading::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reading::transcript::ContextTracker;

    fn assistant(model: &str, input: u64, creation: u64, read: u64) -> String {
        format!(
            r#"{{"type":"assistant","isSidechain":false,"message":{{"model":"{model}","content":[{{"type":"text","text":"hi"}}],"usage":{{"input_tokens":{input},"cache_creation_input_tokens":{creation},"cache_read_input_tokens":{read},"output_tokens":99}}}}}}"#
        )
    }

    const LIMIT: &str = r#"{"type":"assistant","isApiErrorMessage":true,"error":"rate_limit","timestamp":"2026-12-01T13:00:00Z","message":{"model":"<synthetic>","content":[{"type":"text","text":"You've hit your session limit · resets 3pm"}]}}"#;

    #[test]
    fn the_limit_the_records_end_on_is_kept_until_a_real_response_follows() {
        let mut tracker = ContextTracker::reading_with(read_line);
        tracker.feed_line(assistant("claude-opus-4-1", 10, 0, 0).as_bytes(), 0);
        tracker.feed_line(LIMIT.as_bytes(), 100);
        let limit = tracker.limit().expect("a limit").clone();
        assert_eq!(
            (limit.offset, limit.found.notice.kind.as_str()),
            (100, "session limit")
        );
        assert!(limit.found.at_ms.is_some());
        // The limit record says nothing about the context.
        assert_eq!(tracker.current().map(|c| c.used_tokens), Some(10));
        // A backwards search that read the limit first keeps it unless later text answered.
        let earlier = ContextTracker::reading_with(read_line);
        assert!(
            earlier
                .clone()
                .followed_by(tracker.clone())
                .limit()
                .is_some()
        );
        let mut answered = ContextTracker::reading_with(read_line);
        answered.feed_line(assistant("claude-opus-4-1", 20, 0, 0).as_bytes(), 200);
        assert!(tracker.clone().followed_by(answered).limit().is_none());
        tracker.feed_line(assistant("claude-opus-4-1", 30, 0, 0).as_bytes(), 300);
        assert!(tracker.limit().is_none());
    }

    #[test]
    fn sums_input_and_both_cache_counts_but_not_output() {
        assert_eq!(
            parse_record(assistant("claude-x", 4, 2150, 18420).as_bytes()),
            Some((20574, Some("claude-x".into()), UsageSource::Assistant))
        );
    }

    #[test]
    fn skips_unknown_types_blank_and_garbage_lines() {
        for line in [
            &br#"{"type":"file-history-snapshot","x":1}"#[..],
            br#"{"type":"user","message":{"content":"assistant"}}"#,
            b"",
            b"   \r\n",
            b"\xff\xfe{assistant",
            br#"{"type":"assistant","message":"#,
            br#"["assistant"]"#,
        ] {
            assert_eq!(parse_record(line), None);
        }
    }

    #[test]
    fn tolerates_crlf_and_odd_field_types() {
        let line = format!("{}\r\n", assistant("m", 1, 2, 3));
        assert_eq!(
            parse_record(line.as_bytes()),
            Some((6, Some("m".into()), UsageSource::Assistant))
        );
        // A field of a surprising type is lost alone.
        let odd = br#"{"type":"assistant","isSidechain":"yes","message":{"model":7,"usage":{"input_tokens":5}}}"#;
        assert_eq!(parse_record(odd), Some((5, None, UsageSource::Assistant)));
        let no_usage =
            br#"{"type":"assistant","message":{"model":"m","usage":{"input_tokens":"5"}}}"#;
        assert_eq!(parse_record(no_usage), None);
    }

    #[test]
    fn compact_boundary_resets_to_post_tokens_and_keeps_model() {
        let mut t = ContextTracker::reading_with(read_line);
        t.feed_line(
            assistant("claude-opus-4-6[1m]", 10, 0, 90_000).as_bytes(),
            0,
        );
        t.feed_line(
            br#"{"type":"system","subtype":"compact_boundary","isSidechain":false,"compactMetadata":{"trigger":"auto","preTokens":90010,"postTokens":14310}}"#,
            100,
        );
        let r = t.current().cloned();
        assert_eq!(
            r,
            Some(ContextReading {
                used_tokens: 14310,
                model: Some("claude-opus-4-6[1m]".into()),
                source: UsageSource::CompactBoundary,
                window: None,
            })
        );
    }

    #[test]
    fn followed_by_equals_feeding_in_order() {
        let boundary =
            r#"{"type":"system","subtype":"compact_boundary","compactMetadata":{"postTokens":5}}"#
                .to_owned();
        let lines = [
            assistant("a", 1, 0, 0),
            boundary.clone(),
            r#"{"type":"assistant","message":{"usage":{"input_tokens":9}}}"#.to_owned(),
            assistant("b", 2, 0, 0),
            boundary,
            assistant("<synthetic>", 0, 0, 0),
        ];
        for n in 0..=lines.len() {
            for split in 0..=n {
                let mut whole = ContextTracker::reading_with(read_line);
                let (mut early, mut late) = (
                    ContextTracker::reading_with(read_line),
                    ContextTracker::reading_with(read_line),
                );
                for (i, line) in lines.iter().take(n).enumerate() {
                    whole.feed_line(line.as_bytes(), i as u64);
                    let part = if i < split { &mut early } else { &mut late };
                    part.feed_line(line.as_bytes(), i as u64);
                }
                let merged = early.followed_by(late);
                // Every field: the reading, the model, the limit and the windows.
                let (merged, whole) = (format!("{merged:?}"), format!("{whole:?}"));
                assert_eq!(merged, whole, "n={n} split={split}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics_on_any_bytes(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let _ = parse_record(&bytes);
            ContextTracker::reading_with(read_line).feed_line(&bytes, 0);
        }

        #[test]
        fn never_panics_on_mangled_records(cut in 0usize..200, flip in 0usize..200) {
            let mut line = assistant("claude-sonnet-4-5", 3, 4, 5).into_bytes();
            if let Some(b) = line.get_mut(flip) { *b ^= 0x20; }
            line.truncate(cut.min(line.len()));
            let _ = parse_record(&line);
        }
    }
}
