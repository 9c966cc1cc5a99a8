//! JSON exactly as Python's `json.dumps` writes it (separators, `ensure_ascii`, float `repr`): a
//! spool line byte-for-byte the Python bridge's, so its drainers keep working, and `panes.json`
//! as the reference writer lays it out (`indent=2, sort_keys=True`). Also a one-line ASCII form
//! for quoting untrusted values, so no escape sequence from a damaged file reaches a terminal.

use serde_json::{Number, Value};
use std::fmt::Write as _;

/// A value that standard JSON cannot express (an overflowing float such as `1e400`).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("number {0} is not finite")]
pub struct NotSerializable(pub String);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// `json.dumps(value)`: key order kept, `, ` and `: ` between items.
    Line,
    /// `json.dumps(value, indent=2, sort_keys=True)`, without the trailing newline.
    File,
    /// One line, keys sorted, `,` and `: `, numbers verbatim: never fails.
    Quote,
}

/// Python's rendering of a whole value (key order kept, ASCII-escaped, Python's separators).
pub fn to_string(value: &Value) -> Result<String, NotSerializable> {
    lay_out(value, Layout::Line)
}

/// `panes.json`'s text without the trailing newline. Fails only on a number JSON cannot express
/// (`1e400`).
pub fn to_pretty_ascii(value: &Value) -> Result<String, NotSerializable> {
    lay_out(value, Layout::File)
}

/// One line, ASCII only, keys sorted, numbers verbatim: never fails.
pub fn to_compact_ascii(value: &Value) -> String {
    lay_out(value, Layout::Quote).unwrap_or_default()
}

fn lay_out(value: &Value, layout: Layout) -> Result<String, NotSerializable> {
    let mut out = String::new();
    write_value(&mut out, value, layout, 0)?;
    Ok(out)
}

fn write_value(
    out: &mut String,
    value: &Value,
    layout: Layout,
    level: usize,
) -> Result<(), NotSerializable> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) if layout == Layout::Quote => out.push_str(&n.to_string()),
        Value::Number(n) => write_number(n, out)?,
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            write_items(out, layout, level, "[]", items.iter().map(|v| (None, v)))?;
        }
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().map(|(key, v)| (Some(key), v)).collect();
            if layout != Layout::Line {
                // UTF-8 byte order is code point order, as Python's `sort_keys`.
                entries.sort_by_key(|(key, _)| *key);
            }
            write_items(out, layout, level, "{}", entries.into_iter())?;
        }
    }
    Ok(())
}

/// The items (and an object's keys) between `brackets`, one a line in the file layout.
fn write_items<'a>(
    out: &mut String,
    layout: Layout,
    level: usize,
    brackets: &str,
    items: impl Iterator<Item = (Option<&'a String>, &'a Value)>,
) -> Result<(), NotSerializable> {
    let (open, close) = brackets.split_at(1);
    out.push_str(open);
    let mut any = false;
    for (key, item) in items {
        if std::mem::replace(&mut any, true) {
            out.push_str(if layout == Layout::Line { ", " } else { "," });
        }
        newline(out, layout, level + 1);
        if let Some(key) = key {
            write_string(key, out);
            out.push_str(": ");
        }
        write_value(out, item, layout, level + 1)?;
    }
    if any {
        newline(out, layout, level);
    }
    out.push_str(close);
    Ok(())
}

fn newline(out: &mut String, layout: Layout, level: usize) {
    if layout == Layout::File {
        out.push('\n');
        out.push_str(&"  ".repeat(level));
    }
}

fn write_number(n: &Number, out: &mut String) -> Result<(), NotSerializable> {
    let text = n.as_str();
    if text.contains(['.', 'e', 'E']) {
        let value = text.parse::<f64>().ok().filter(|v| v.is_finite());
        let value = value.ok_or_else(|| NotSerializable(text.to_string()))?;
        write_float_repr(value, out);
    } else if text == "-0" {
        // Python reads `-0` as the integer 0.
        out.push('0');
    } else {
        // JSON integers have no leading zeros, so the text is already Python's `int` repr.
        out.push_str(text);
    }
    Ok(())
}

/// Python's `float.__repr__`: Rust's `{:?}` has the same digits, `.0` and switch to exponent
/// form; Python only writes the exponent signed and two digits wide (`1e+16`, `1.5e-05`).
fn write_float_repr(value: f64, out: &mut String) {
    let debug = format!("{value:?}");
    match debug.split_once('e') {
        None => out.push_str(&debug),
        Some((mantissa, exp)) => {
            let (sign, digits) = exp.strip_prefix('-').map_or(('+', exp), |d| ('-', d));
            let _ = write!(out, "{mantissa}e{sign}{digits:0>2}");
        }
    }
}

/// A JSON string with `ensure_ascii`, as Python writes it: the short escapes, and everything
/// else outside printable ASCII as `\uXXXX` (lowercase, surrogate pairs above U+FFFF).
pub fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_whole_value_keeps_key_order_escapes_and_separators() {
        let value: Value = serde_json::from_str(r#"{"b":1.0,"a":"süß"}"#).unwrap();
        assert_eq!(
            to_string(&value).unwrap(),
            r#"{"b": 1.0, "a": "s\u00fc\u00df"}"#
        );
    }

    fn py(json: &str) -> String {
        to_string(&serde_json::from_str(json).expect("test JSON parses")).expect("serialisable")
    }

    #[test]
    fn reproduces_the_real_bus_body_byte_for_byte() {
        // The bus itself serialises with json.dumps, so re-serialising must give its bytes back.
        let body = r#"{"event_id": 1, "event_type": "help_needed", "payload": "DM test payload \u00fcn\u00efcode \"quoted\"", "session_id": "anonymous", "timestamp": "2026-11-30T10:57:47.114154", "channel": "session:50c5905d-fc5f-4524-92d9-ba1d7cecde8d", "correlation_id": "corr-1", "signal_level": "actionable", "title": "T1", "tags": ["a", "b"]}"#;
        assert_eq!(py(body), body);
    }

    #[test]
    fn compact_input_gets_python_separators_and_order_is_kept() {
        assert_eq!(
            py(r#"{"b":1,"a":[1,2,{}],"c":{"z":null,"y":true}}"#),
            r#"{"b": 1, "a": [1, 2, {}], "c": {"z": null, "y": true}}"#
        );
    }

    #[test]
    fn escapes_like_ensure_ascii() {
        assert_eq!(
            py(r#""süß \u0000\u007f\u001b é 😀 /""#),
            r#""s\u00fc\u00df \u0000\u007f\u001b \u00e9 \ud83d\ude00 /""#
        );
        assert_eq!(py(r#""\b\f\n\r\t\"\\""#), r#""\b\f\n\r\t\"\\""#);
    }

    #[test]
    fn floats_follow_python_repr() {
        let cases = [
            ("1.5", "1.5"),
            ("1.0", "1.0"),
            ("100.0", "100.0"),
            ("1e16", "1e+16"),
            ("1.5e16", "1.5e+16"),
            ("1e15", "1000000000000000.0"),
            ("0.0001", "0.0001"),
            ("0.00001", "1e-05"),
            ("-2.5e-7", "-2.5e-07"),
            ("-0.0", "-0.0"),
            ("0.1", "0.1"),
            ("123456789.125", "123456789.125"),
            ("1E400", ""),
        ];
        for (input, want) in cases {
            let v: Value = serde_json::from_str(input).expect("parses");
            match to_string(&v) {
                Ok(got) => assert_eq!(got, want, "for {input}"),
                Err(_) => assert!(want.is_empty(), "{input} should serialise"),
            }
        }
    }

    #[test]
    fn integers_keep_any_size_and_minus_zero_is_zero() {
        assert_eq!(
            py("123456789012345678901234567890"),
            "123456789012345678901234567890"
        );
        assert_eq!(py("-0"), "0");
        assert_eq!(py("-17"), "-17");
    }

    #[test]
    fn overflowing_float_is_not_serialisable() {
        let v: Value = serde_json::from_str(r#"{"payload": -1e400}"#).expect("parses as text");
        assert!(to_string(&v).is_err());
    }

    /// Cross-checks against the real Python when the machine has one (CI and dev machines do).
    #[test]
    fn agrees_with_python_json_dumps() {
        let inputs = [
            r#"{"a": 1.25e-9, "b": [0.5, 3.0, 7e22, 1.7976931348623157e308], "c": "\u2028 x \ud83e\udd80"}"#,
            r#"{"n": 12345678901234567890123, "f": 2.2250738585072014e-308, "s": "tab\tnul\u0000"}"#,
            r#"[1e-5, 9.999999999999999e15, 1e16, 0.30000000000000004, -1.5e-300]"#,
        ];
        for input in inputs {
            let Ok(output) = std::process::Command::new("python3")
                .args([
                    "-c",
                    "import json,sys; sys.stdout.write(json.dumps(json.loads(sys.argv[1])))",
                    input,
                ])
                .output()
            else {
                eprintln!("python3 not available; skipping the cross-check");
                return;
            };
            assert!(output.status.success());
            assert_eq!(
                py(input),
                String::from_utf8_lossy(&output.stdout),
                "for {input}"
            );
        }
    }

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
