//! What the bus sends, as wakebridge takes it in: the webhook event, the session id rule, the
//! signature, and the Python-identical JSON of a spool line and of `panes.json`.

pub mod event;
pub(crate) mod pyjson;
pub mod session_id;
pub mod signature;

/// A JSON value's kind as an error message names it: "a string", "an object", ...
pub fn json_kind(value: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
