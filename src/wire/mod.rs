//! What the bus sends, as wakebridge takes it in: the webhook event (parsing, the signal-level
//! filter, the target session, the spool line), the session id rule, its signature, and the
//! Python-identical JSON the spool line is written in; and how any JSON value is named in an
//! error message ([`json_kind`]).

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
