//! The exact text of `panes.json` as the reference writer produces it (Python's
//! `json.dumps(indent=2, sort_keys=True, ensure_ascii=True)`), and a one-line ASCII form for
//! quoting untrusted values, so no escape sequence from a damaged file reaches a terminal.

use crate::wire::pyjson::NotSerializable;
use serde_json::Value;

const INDENT: &str = "  ";

/// Without the trailing newline. Fails only on a number JSON cannot express (`1e400`).
pub fn to_pretty_ascii(value: &Value) -> Result<String, NotSerializable> {
    let mut out = String::new();
    write_value(&mut out, value, Some(0))?;
    Ok(out)
}

/// One line, ASCII only, keys sorted, numbers verbatim: never fails.
pub fn to_compact_ascii(value: &Value) -> String {
    let mut out = String::new();
    let _ = write_value(&mut out, value, None);
    out
}

/// `indent`: `Some(level)` for the file layout, `None` for one line.
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
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => crate::wire::pyjson::write_string(s, out),
        Value::Array(items) => write_items(out, indent, "[]", items.iter().map(|v| (None, v)))?,
        Value::Object(map) => {
            // UTF-8 byte order is code point order, as Python's `sort_keys`.
            let mut entries: Vec<_> = map.iter().map(|(key, v)| (Some(key), v)).collect();
            entries.sort_by_key(|(key, _)| *key);
            write_items(out, indent, "{}", entries.into_iter())?;
        }
    }
    Ok(())
}

/// The items (and an object's keys) between `brackets`, one a line in the file layout.
fn write_items<'a>(
    out: &mut String,
    indent: Option<usize>,
    brackets: &str,
    items: impl Iterator<Item = (Option<&'a String>, &'a Value)>,
) -> Result<(), NotSerializable> {
    let (open, close) = brackets.split_at(1);
    out.push_str(open);
    let inner = indent.map(|level| level + 1);
    let mut any = false;
    for (key, item) in items {
        if std::mem::replace(&mut any, true) {
            out.push(',');
        }
        newline(out, inner);
        if let Some(key) = key {
            crate::wire::pyjson::write_string(key, out);
            out.push_str(": ");
        }
        write_value(out, item, inner)?;
    }
    if any {
        newline(out, indent);
    }
    out.push_str(close);
    Ok(())
}

fn newline(out: &mut String, indent: Option<usize>) {
    if let Some(level) = indent {
        out.push('\n');
        out.push_str(&INDENT.repeat(level));
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
