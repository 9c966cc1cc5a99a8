//! The exact text of `panes.json` as the reference writer produces it (Python's
//! `json.dumps(indent=2, sort_keys=True, ensure_ascii=True)`: sorted keys, `\uXXXX` escapes,
//! Python's numbers), and a one-line ASCII form for quoting untrusted values in log lines, so a
//! bidi override or escape sequence from a damaged file never reaches a terminal.

use crate::wire::pyjson::NotSerializable;
use serde_json::Value;
use std::fmt::Write as _;

/// Indent per nesting level, matching the reference writer's `indent=2`.
const INDENT: &str = "  ";

/// `value` as the reference writer lays it out, without the trailing newline. Fails only on a
/// number JSON cannot express (an overflowing float such as `1e400`), as Python's does.
pub fn to_pretty_ascii(value: &Value) -> Result<String, NotSerializable> {
    let mut out = String::new();
    write_value(&mut out, value, Some(0))?;
    Ok(out)
}

/// `value` on one line, ASCII only, keys sorted: for quoting values in messages. Numbers keep
/// their original text, so this never fails.
pub fn to_compact_ascii(value: &Value) -> String {
    let mut out = String::new();
    // Without `Some(indent)` numbers are written verbatim and nothing can fail.
    let _ = write_value(&mut out, value, None);
    out
}

/// `indent` is `Some(level)` for the file layout (numbers in Python's rendering) and `None` for
/// one line (numbers verbatim).
fn write_value(
    out: &mut String,
    value: &Value,
    indent: Option<usize>,
) -> Result<(), NotSerializable> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(_) if indent.is_some() => {
            out.push_str(&crate::wire::pyjson::to_string(value)?);
        }
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => crate::wire::pyjson::write_string(s, out),
        Value::Array(items) => {
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, indent.map(|level| level + 1));
                write_value(out, item, indent.map(|level| level + 1))?;
            }
            newline(out, indent);
            out.push(']');
        }
        Value::Object(map) => {
            if map.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            // Rust's `str` order is UTF-8 byte order, which equals code point order: the same
            // order Python's `sort_keys` gives.
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, indent.map(|level| level + 1));
                crate::wire::pyjson::write_string(key, out);
                out.push_str(": ");
                write_value(out, item, indent.map(|level| level + 1))?;
            }
            newline(out, indent);
            out.push('}');
        }
    }
    Ok(())
}

fn newline(out: &mut String, indent: Option<usize>) {
    if let Some(level) = indent {
        out.push('\n');
        for _ in 0..level {
            out.push_str(INDENT);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lays_out_like_python_indent_2_sorted_keys() {
        let value = json!({
            "sid-2": {"pane": "0", "mux": "zellij", "session": "s"},
            "sid-1": {"mux": "tmux", "pane": "%3"},
            "_note": [1, "x", {}, []],
        });
        let expected = "{\n  \"_note\": [\n    1,\n    \"x\",\n    {},\n    []\n  ],\n  \
                        \"sid-1\": {\n    \"mux\": \"tmux\",\n    \"pane\": \"%3\"\n  },\n  \
                        \"sid-2\": {\n    \"mux\": \"zellij\",\n    \"pane\": \"0\",\n    \
                        \"session\": \"s\"\n  }\n}";
        assert_eq!(to_pretty_ascii(&value).unwrap(), expected);
        assert_eq!(to_pretty_ascii(&json!({})).unwrap(), "{}");
    }

    #[test]
    fn escapes_everything_outside_printable_ascii() {
        let value = json!("süß\u{7f}\u{1b}[31m\"\\\n\t\u{8}\u{c}\r\u{1F9B3}");
        assert_eq!(
            to_compact_ascii(&value),
            r#""s\u00fc\u00df\u007f\u001b[31m\"\\\n\t\b\f\r\ud83e\uddb3""#
        );
    }

    #[test]
    fn numbers_render_as_python_and_overflow_is_refused() {
        let value: Value = serde_json::from_str(r#"{"a": [1E2, 10, -0]}"#).unwrap();
        assert_eq!(
            to_pretty_ascii(&value).unwrap(),
            "{\n  \"a\": [\n    100.0,\n    10,\n    0\n  ]\n}"
        );
        let huge: Value = serde_json::from_str(r#"{"a": 1e400}"#).unwrap();
        assert!(to_pretty_ascii(&huge).is_err());
        assert!(to_compact_ascii(&huge).starts_with(r#"{"a": 1e"#));
    }

    #[test]
    fn output_parses_back_to_the_same_value() {
        let value = json!({"b": [null, true, false, 1.5, -3], "a": {"k": "v\u{202e}"}});
        let text = to_pretty_ascii(&value).unwrap();
        assert!(text.is_ascii());
        let back: Value = serde_json::from_str(&text).expect("own output parses");
        assert_eq!(back, value);
    }
}
