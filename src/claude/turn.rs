//! The newest turn of a Claude Code transcript, read from its tail at the turn's `Stop`: the
//! prompt that started it, the tokens its API calls used (input, cache read, cache creation and
//! output, once per message: Claude Code writes one record per content block, each carrying the
//! message's usage) and how many tools it called. What wakebridge charges its own texts with.
//! Pure: the caller reads the tail ([`crate::reading::transcript::tail`], [`TAIL_BYTES`]).

use std::collections::HashSet;

use serde_json::Value;

use crate::reading::transcript::Turn;

/// How far back from the end a turn is looked for: a turn with more output than this (large
/// tool results) is not charged rather than read whole on every Stop.
pub const TAIL_BYTES: u64 = 4 * 1024 * 1024;

/// The newest main-chain turn in `tail`; `None` when no prompt starts one there. Read from the
/// end back to the prompt, so older turns in the tail are not parsed.
pub fn last_turn(tail: &[u8]) -> Option<Turn> {
    let mut seen = HashSet::new();
    let (mut tokens, mut tools) = (0u64, 0u32);
    let records = tail
        .rsplit(|&b| b == b'\n')
        .filter(|line| !line.trim_ascii().is_empty())
        .filter_map(|line| serde_json::from_slice::<Value>(line).ok())
        .filter(|r| r.get("isSidechain") != Some(&Value::Bool(true)));
    for record in records {
        if let Some(prompt) = prompt_of(&record) {
            return Some(Turn {
                prompt_id: record.get("uuid")?.as_str()?.to_owned(),
                prompt,
                tokens,
                tools,
            });
        }
        if record.get("type").and_then(Value::as_str) != Some("assistant") {
            continue;
        }
        let Some(message) = record.get("message") else {
            continue;
        };
        let blocks = message.get("content").and_then(Value::as_array);
        let uses = blocks.map_or(0, |b| b.iter().filter(|b| b["type"] == "tool_use").count());
        tools = tools.saturating_add(u32::try_from(uses).unwrap_or(u32::MAX));
        let id = message
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if id.is_empty() || seen.insert(id.to_owned()) {
            let usage = message.get("usage").and_then(super::transcript::usage_from);
            let all = usage.map_or(0, |u| u.context_tokens().saturating_add(u.output_tokens));
            tokens = tokens.saturating_add(all);
        }
    }
    None
}

/// A person's (or wakebridge's) prompt: a main-chain `user` record whose content is text, not a
/// tool's result or a record Claude Code wrote for itself.
fn prompt_of(record: &Value) -> Option<String> {
    if record.get("type").and_then(Value::as_str) != Some("user")
        || record.get("isMeta") == Some(&Value::Bool(true))
    {
        return None;
    }
    match record.pointer("/message/content")? {
        Value::String(text) => Some(text.clone()),
        Value::Array(blocks) => {
            if blocks.iter().any(|b| b["type"] == "tool_result") {
                return None;
            }
            let texts: Vec<&str> = blocks
                .iter()
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str())
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn line(v: Value) -> String {
        format!("{v}\n")
    }

    fn prompt(uuid: &str, text: &str) -> String {
        line(json!({"type": "user", "uuid": uuid, "message": {"role": "user", "content": text}}))
    }

    fn assistant(id: &str, block: Value, input: u64, output: u64) -> String {
        line(
            json!({"type": "assistant", "message": {"id": id, "content": [block],
            "usage": {"input_tokens": input, "cache_read_input_tokens": 1000,
                      "cache_creation_input_tokens": 10, "output_tokens": output}}}),
        )
    }

    fn tool_result() -> String {
        line(
            json!({"type": "user", "uuid": "r", "message": {"role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}}),
        )
    }

    #[test]
    fn a_turn_is_its_prompt_then_each_message_counted_once_and_its_tools() {
        let text = json!({"type": "text", "text": "hi"});
        let tool = json!({"type": "tool_use", "id": "t", "name": "Bash", "input": {}});
        let transcript = [
            prompt("p0", "an older turn"),
            assistant("m0", text.clone(), 5, 5),
            prompt("p1", "Please continue."),
            // One message written as two records (a text block, then a tool call).
            assistant("m1", text.clone(), 100, 20),
            assistant("m1", tool.clone(), 100, 20),
            tool_result(),
            line(json!({"type": "user", "isMeta": true, "message": {"content": "caveat"}})),
            line(json!({"type": "assistant", "isSidechain": true,
                "message": {"id": "side", "usage": {"input_tokens": 9999}}})),
            assistant("m2", text, 200, 30),
        ]
        .concat();
        let turn = last_turn(transcript.as_bytes()).unwrap();
        assert_eq!(turn.prompt_id, "p1");
        assert_eq!(turn.prompt, "Please continue.");
        assert_eq!(turn.tokens, (100 + 1010 + 20) + (200 + 1010 + 30));
        assert_eq!(turn.tools, 1);
    }

    #[test]
    fn text_blocks_make_a_prompt_and_no_prompt_is_no_turn() {
        let blocks = line(json!({"type": "user", "uuid": "p", "message": {"content": [
            {"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]}}));
        assert_eq!(last_turn(blocks.as_bytes()).unwrap().prompt, "a\nb");
        assert_eq!(last_turn(tool_result().as_bytes()), None);
        assert_eq!(last_turn(b"not json\n{}\n"), None);
    }

    #[test]
    fn the_tail_starts_at_a_whole_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let filler = "x".repeat(usize::try_from(TAIL_BYTES).unwrap());
        let text = format!("{filler}\n{}", prompt("p", "last"));
        std::fs::write(&path, text).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let tail = crate::reading::transcript::tail(file, TAIL_BYTES).unwrap();
        assert_eq!(last_turn(&tail).unwrap().prompt, "last");
        assert!(tail.starts_with(b"{"));
    }
}
