//! The webhook event: the body parsed strictly, the signal-level filter, the target from a
//! `session:<id>` channel, the spool line, and its identity (the body's digest).

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::wire::pyjson;
use crate::wire::session_id::SessionId;

const ACTIONABLE: &str = "actionable";
const SESSION_PREFIX: &str = "session:";

/// Its kebab-case names are `/hook`'s rejection reasons (`invalid-json`, ...).
#[derive(Debug, thiserror::Error, PartialEq, Eq, strum::IntoStaticStr, strum::VariantNames)]
#[strum(serialize_all = "kebab-case")]
pub enum EventError {
    #[error("invalid JSON")]
    InvalidJson,
    #[error("expected a JSON object")]
    NotObject,
    #[error("payload not serializable to a spool line")]
    NotSerializable,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Triage {
    /// `signal_level` is not exactly `"actionable"`; `has_level` tells an old bus (no key at
    /// all, or null) from a deliberate lower level.
    BelowActionable {
        has_level: bool,
    },
    /// No usable `session:<id>` channel; `unsafe_channel` holds a `session:` channel whose id
    /// failed the charset rule (worth a rate-limited warning).
    NoTarget {
        unsafe_channel: Option<String>,
    },
    Deliver(Event),
}

/// An actionable event for one target session, ready to spool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub target: SessionId,
    pub event_id: Option<String>,
    /// The sender's `session_id`.
    pub sender: Option<String>,
    /// The spool line, newline included: Python's `json.dumps` of the parsed object.
    pub line: String,
    /// Hex SHA-256 of the body: the same for every redelivery.
    pub identity: String,
}

pub fn triage(body: &[u8]) -> Result<Triage, EventError> {
    let value: Value = serde_json::from_slice(body).map_err(|_| EventError::InvalidJson)?;
    let Value::Object(map) = &value else {
        return Err(EventError::NotObject);
    };
    match map.get("signal_level") {
        Some(Value::String(level)) if level == ACTIONABLE => {}
        Some(Value::Null) | None => return Ok(Triage::BelowActionable { has_level: false }),
        Some(_) => return Ok(Triage::BelowActionable { has_level: true }),
    }
    let channel = map.get("channel").and_then(Value::as_str);
    let Some(target) = channel.and_then(|channel| channel.strip_prefix(SESSION_PREFIX)) else {
        return Ok(Triage::NoTarget {
            unsafe_channel: None,
        });
    };
    let Some(target) = SessionId::parse(target) else {
        return Ok(Triage::NoTarget {
            unsafe_channel: Some(format!("{SESSION_PREFIX}{target}")),
        });
    };
    let line = pyjson::to_string(&value).map_err(|_| EventError::NotSerializable)? + "\n";
    let text = |key: &str| match map.get(key) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    Ok(Triage::Deliver(Event {
        target,
        event_id: text("event_id"),
        sender: text("session_id"),
        line,
        identity: hex::encode(Sha256::digest(body)),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT_EVENT: &str = r#"{"event_id":1,"event_type":"help_needed","payload":"need a review","session_id":"sender-1","timestamp":"2026-08-08T00:00:00","channel":"session:target-1","correlation_id":null,"signal_level":"actionable"}"#;

    fn deliver(body: &str) -> Event {
        match triage(body.as_bytes()) {
            Ok(Triage::Deliver(e)) => e,
            other => panic!("expected a delivery, got {other:?}"),
        }
    }

    #[test]
    fn default_event_is_delivered_to_its_target_with_a_python_line() {
        let e = deliver(DEFAULT_EVENT);
        assert_eq!(e.target, "target-1");
        assert_eq!(e.event_id.as_deref(), Some("1"));
        assert_eq!(e.sender.as_deref(), Some("sender-1"));
        assert!(e.line.starts_with(
            r#"{"event_id": 1, "event_type": "help_needed", "payload": "need a review""#
        ));
        assert!(e.line.ends_with("\"signal_level\": \"actionable\"}\n"));
    }

    #[test]
    fn minimal_body_is_enough() {
        assert_eq!(
            deliver(r#"{"signal_level":"actionable","channel":"session:x"}"#).target,
            "x"
        );
    }

    #[test]
    fn levels_other_than_exact_actionable_are_ignored() {
        for body in [
            r#"{"signal_level":"info","channel":"session:x"}"#,
            r#"{"signal_level":"Actionable","channel":"session:x"}"#,
            r#"{"signal_level":5,"channel":"session:x"}"#,
        ] {
            assert_eq!(
                triage(body.as_bytes()),
                Ok(Triage::BelowActionable { has_level: true })
            );
        }
        for body in [
            r#"{"channel":"session:x"}"#,
            r#"{"signal_level":null,"channel":"session:x"}"#,
        ] {
            assert_eq!(
                triage(body.as_bytes()),
                Ok(Triage::BelowActionable { has_level: false })
            );
        }
    }

    #[test]
    fn unusable_channels_have_no_target() {
        for channel in [
            "123",
            "true",
            "[\"session:x\"]",
            "{\"c\":1}",
            "null",
            "\"repo:myrepo\"",
            "\"all\"",
        ] {
            let body = format!(r#"{{"signal_level":"actionable","channel":{channel}}}"#);
            assert_eq!(
                triage(body.as_bytes()),
                Ok(Triage::NoTarget {
                    unsafe_channel: None
                }),
                "{channel}"
            );
        }
        let long = "a".repeat(300);
        for id in [
            "",
            "../../victim/x",
            "/etc/cron.d/x",
            "a/b",
            "a\\u0000b",
            "..",
            "a:b",
            long.as_str(),
        ] {
            let body = format!(r#"{{"signal_level":"actionable","channel":"session:{id}"}}"#);
            assert!(
                matches!(
                    triage(body.as_bytes()),
                    Ok(Triage::NoTarget {
                        unsafe_channel: Some(_)
                    })
                ),
                "{id}"
            );
        }
    }

    #[test]
    fn malformed_bodies_are_told_apart() {
        assert_eq!(triage(b"not-json{"), Err(EventError::InvalidJson));
        assert_eq!(triage(b"\x80abc"), Err(EventError::InvalidJson));
        assert_eq!(
            triage("[".repeat(300_000).as_bytes()),
            Err(EventError::InvalidJson)
        );
        assert_eq!(triage(br#"{"payload": NaN}"#), Err(EventError::InvalidJson));
        assert_eq!(
            triage(br#"{"payload": Infinity}"#),
            Err(EventError::InvalidJson)
        );
        assert_eq!(triage(br#"{"x": -Infinity}"#), Err(EventError::InvalidJson));
        assert_eq!(triage(b""), Err(EventError::InvalidJson));
        for body in ["123", r#"["x"]"#, r#""bare""#, "null"] {
            assert_eq!(triage(body.as_bytes()), Err(EventError::NotObject));
        }
        let overflow = DEFAULT_EVENT.replace(r#""need a review""#, "1e400");
        assert_eq!(
            triage(overflow.as_bytes()),
            Err(EventError::NotSerializable)
        );
    }

    #[test]
    fn identity_is_the_body_digest() {
        let a = deliver(DEFAULT_EVENT);
        let b = deliver(DEFAULT_EVENT);
        let other_time =
            deliver(&DEFAULT_EVENT.replace("2026-08-08T00:00:00", "2026-08-09T00:00:00"));
        assert_eq!(a.identity, b.identity);
        assert_ne!(a.identity, other_time.identity);
    }
}
