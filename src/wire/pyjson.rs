//! JSON exactly as Python's `json.dumps` writes it by default (separators, `ensure_ascii`, float
//! `repr`), so a spool line is byte-for-byte the Python bridge's and its drainers keep working.

use serde_json::{Number, Value};
use std::fmt::Write as _;

/// A value that standard JSON cannot express (an overflowing float such as `1e400`).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("number {0} is not finite")]
pub struct NotSerializable(pub String);

/// Appends the Python rendering of `value` to `out`.
pub fn write_value(value: &Value, out: &mut String) -> Result<(), NotSerializable> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(n, out)?,
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(item, out)?;
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_string(key, out);
                out.push_str(": ");
                write_value(item, out)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

/// Python's rendering of a whole value (key order kept, ASCII-escaped, Python's separators).
pub fn to_string(value: &Value) -> Result<String, NotSerializable> {
    let mut out = String::new();
    write_value(value, &mut out)?;
    Ok(out)
}

fn write_number(n: &Number, out: &mut String) -> Result<(), NotSerializable> {
    let text = n.as_str();
    if text.contains(['.', 'e', 'E']) {
        let value: f64 = text
            .parse()
            .map_err(|_| NotSerializable(text.to_string()))?;
        if !value.is_finite() {
            return Err(NotSerializable(text.to_string()));
        }
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
}
