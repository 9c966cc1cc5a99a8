//! The `panes.json` value contract: `{"mux": "tmux", "pane": "%3"}`, `{"mux": "zellij", "pane":
//! "0", "session": "name"}`, or a bare string (a legacy tmux pane id).

use crate::wakedir::printable::is_valid_string;
use crate::wakedir::target::PaneTarget;
use crate::wire::pyjson::to_compact_ascii;
use serde_json::{Value, json};

pub const PANES_FILE: &str = "panes.json";
/// Sibling lock file for writers. A sibling, because `panes.json` is replaced by rename and
/// `flock(2)` binds to an inode: locking the file being replaced would exclude nobody.
pub const PANES_LOCK_FILE: &str = "panes.lock";
/// The most characters of an offending value quoted in an error.
const MAX_QUOTED_CHARS: usize = 120;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidTarget {
    #[error("not a pane id ({0}): a bare pane id must be a non-empty printable string")]
    BarePane(String),
    #[error(
        "not a pane id or mapping object ({0}): expected a pane id string or \
         {{\"mux\": \"tmux\"|\"zellij\", \"pane\": ...}}"
    )]
    NotPaneOrObject(String),
    #[error("unsupported mux {0} (expected one of tmux, zellij)")]
    UnsupportedMux(String),
    #[error("pane is not a pane id ({0}): it must be a non-empty printable string")]
    BadPane(String),
    #[error("zellij entry needs a session name (got {0}): add a printable \"session\"")]
    MissingZellijSession(String),
    #[error("session is not a session name ({0}): omit it or make it a printable string")]
    BadSession(String),
}

pub fn parse_target(value: &Value) -> Result<PaneTarget, InvalidTarget> {
    let object = match value {
        Value::String(pane) if is_valid_string(pane) => {
            return Ok(PaneTarget::Tmux {
                pane: pane.clone(),
                session: None,
            });
        }
        Value::String(_) => return Err(InvalidTarget::BarePane(quote(Some(value)))),
        Value::Object(object) => object,
        _ => return Err(InvalidTarget::NotPaneOrObject(quote(Some(value)))),
    };

    let mux = object.get("mux");
    let is_zellij = match mux.and_then(Value::as_str) {
        Some("tmux") => false,
        Some("zellij") => true,
        _ => return Err(InvalidTarget::UnsupportedMux(quote(mux))),
    };
    let pane = match object.get("pane") {
        Some(Value::String(pane)) if is_valid_string(pane) => pane.clone(),
        other => return Err(InvalidTarget::BadPane(quote(other))),
    };
    let session = object.get("session");
    let valid_session = match session {
        Some(Value::String(name)) if is_valid_string(name) => Some(name.clone()),
        _ => None,
    };
    match (is_zellij, valid_session) {
        (true, Some(session)) => Ok(PaneTarget::Zellij { pane, session }),
        (true, None) => Err(InvalidTarget::MissingZellijSession(quote(session))),
        // tmux: no session (absent or null) is fine, one that is there must be valid.
        (false, None) if session.is_some_and(|s| !s.is_null()) => {
            Err(InvalidTarget::BadSession(quote(session)))
        }
        (false, name) => Ok(PaneTarget::Tmux {
            pane,
            session: name,
        }),
    }
}

pub fn entry_json(target: &PaneTarget) -> Value {
    let mut entry = json!({ "mux": target.mux_name(), "pane": target.pane() });
    let session = match target {
        PaneTarget::Tmux { session, .. } => session.as_deref(),
        PaneTarget::Zellij { session, .. } => Some(session.as_str()),
    };
    if let Some(session) = session {
        entry["session"] = json!(session);
    }
    entry
}

/// ASCII-escaped JSON, shortened, or `missing`.
pub fn quote(value: Option<&Value>) -> String {
    let Some(value) = value else {
        return "missing".into();
    };
    let text = to_compact_ascii(value);
    match text.char_indices().nth(MAX_QUOTED_CHARS) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tmux(pane: &str) -> PaneTarget {
        PaneTarget::Tmux {
            pane: pane.into(),
            session: None,
        }
    }

    #[test]
    fn bare_string_is_a_legacy_tmux_pane() {
        assert_eq!(parse_target(&json!("%7")), Ok(tmux("%7")));
        assert_eq!(
            parse_target(&json!("zellij:tenacious-lemur:0")),
            Ok(tmux("zellij:tenacious-lemur:0"))
        );
    }

    #[test]
    fn accepts_both_object_shapes() {
        assert_eq!(
            parse_target(&json!({"mux": "tmux", "pane": "%3"})),
            Ok(tmux("%3"))
        );
        assert_eq!(
            parse_target(&json!({"mux": "tmux", "pane": "%3", "session": null})),
            Ok(tmux("%3"))
        );
        assert_eq!(
            parse_target(&json!({"mux": "tmux", "pane": "%3", "session": "main", "x": 1})),
            Ok(PaneTarget::Tmux {
                pane: "%3".into(),
                session: Some("main".into())
            })
        );
        assert_eq!(
            parse_target(&json!({"mux": "zellij", "pane": "0", "session": "has:colon"})),
            Ok(PaneTarget::Zellij {
                pane: "0".into(),
                session: "has:colon".into()
            })
        );
    }

    #[test]
    fn rejects_the_reference_invalid_values() {
        let invalid = [
            json!(null),
            json!(""),
            json!(0),
            json!([]),
            json!(true),
            json!({"mux": "screen", "pane": "1"}),
            json!({"mux": "zellij:tenacious-lemur", "pane": "0"}),
            json!({"mux": "tmux"}),
            json!({"mux": "tmux", "pane": ""}),
            json!({"mux": "tmux", "pane": 3}),
            json!({"pane": "%1"}),
            json!({"mux": "zellij", "pane": "0"}),
            json!({"mux": "zellij", "pane": "0", "session": null}),
            json!({"mux": "tmux", "pane": "%1", "session": ""}),
            json!({"mux": "tmux", "pane": "%1", "session": 5}),
            json!("%0\u{0}"),
            json!({"mux": "tmux", "pane": "%0\n"}),
            json!({"mux": "tmux", "pane": "\u{1b}[31m"}),
            json!({"mux": "zellij", "pane": "0", "session": "a\u{0}b"}),
            json!({"mux": "zellij", "pane": "0", "session": "a\u{a0}b"}),
        ];
        for value in invalid {
            assert!(parse_target(&value).is_err(), "{value} must be invalid");
        }
    }

    #[test]
    fn reasons_name_the_problem_and_quote_safely() {
        let null = parse_target(&json!(null)).unwrap_err().to_string();
        assert!(
            null.contains("not a pane id") && null.contains("(null)"),
            "{null}"
        );
        let zellij = parse_target(&json!({"mux": "zellij", "pane": "0"}))
            .unwrap_err()
            .to_string();
        assert!(zellij.contains("session name"), "{zellij}");
        let escape = parse_target(&json!("\u{1b}[31m")).unwrap_err().to_string();
        assert!(
            !escape.contains('\u{1b}') && escape.contains("\\u001b"),
            "{escape}"
        );
        let huge = parse_target(&json!("\u{0}".repeat(10_000)))
            .unwrap_err()
            .to_string();
        assert!(huge.len() < 400, "quoted value must be shortened");
    }

    #[test]
    fn entries_round_trip_through_json() {
        let targets = [
            tmux("%3"),
            PaneTarget::Tmux {
                pane: "%3".into(),
                session: Some("main".into()),
            },
            PaneTarget::Zellij {
                pane: "0".into(),
                session: "has:colon".into(),
            },
        ];
        for target in targets {
            let entry = entry_json(&target);
            assert_eq!(parse_target(&entry), Ok(target));
        }
        assert_eq!(
            entry_json(&tmux("%3")),
            json!({"mux": "tmux", "pane": "%3"})
        );
    }
}
