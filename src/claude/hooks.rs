//! Claude Code's hooks as wakebridge hears them: the payload fields it reads ([`HookInput`]),
//! the events the settings wire, and how the ledger spells an event (what each says about the
//! session's turn is `reading::hook`'s). What the hook *does* is `cli::hook`'s.

use serde_json::{Value, json};
use std::time::Duration;

#[cfg(test)]
use crate::reading::hook::{HookKind, IDLE_PROMPT};

/// Largest hook payload accepted: a PreToolUse carrying a huge file write is skipped.
pub const HOOK_STDIN_CAP_BYTES: usize = 1024 * 1024;
/// SessionStart source that fires mid-turn (after an automatic compaction).
pub const SOURCE_COMPACT: &str = "compact";
/// SessionStart's source after `/clear` (the same agent in the same pane, under a new session
/// id), and the reason of the SessionEnd of the id it gives up, which fires just before.
pub const SOURCE_CLEAR: &str = "clear";
/// The Notification matcher the settings wire (a regex over `notification_type`).
pub const NOTIFICATION_MATCHER: &str = "idle_prompt|quota_auto_resume_fired";
/// `timeout` (seconds) written into the settings for each hook command: well over the hook's
/// own 5 s budget, so Claude Code never has to kill it.
pub const SETTINGS_HOOK_TIMEOUT_SECS: u64 = 10;
/// `(event, matcher)` pairs the settings wire.
pub const WIRED_EVENTS: [(&str, Option<&str>); 7] = [
    ("SessionStart", Some("")),
    ("UserPromptSubmit", Some("")),
    ("PreToolUse", Some("")),
    ("Stop", Some("")),
    ("StopFailure", Some("")),
    ("Notification", Some(NOTIFICATION_MATCHER)),
    ("SessionEnd", Some("")),
];

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HookInput {
    pub event_name: String,
    pub session_id: Option<String>,
    pub cwd: Option<String>,
    pub transcript_path: Option<String>,
    /// SessionStart: `startup|resume|clear|compact|fork`.
    pub source: Option<String>,
    /// SessionEnd: `clear|resume|logout|prompt_input_exit|other`.
    pub reason: Option<String>,
    /// Notification: `idle_prompt`, `permission_prompt`, ...
    pub notification_type: Option<String>,
    /// Stop: a Stop hook blocked the last stop.
    pub stop_hook_active: bool,
    /// StopFailure: the API error's kind (`rate_limit`, `server_error`, ...).
    pub error: Option<String>,
    /// Stop and StopFailure: the turn's last assistant text.
    pub last_assistant_message: Option<String>,
    /// UserPromptSubmit: the prompt as submitted (an inbox message's raw text).
    pub prompt: Option<String>,
}

impl HookInput {
    /// The event as the ledger records it: `Notification:<type>` for a notification (the
    /// nudger tells `idle_prompt` from a permission prompt by it), else the event name.
    pub fn recorded_event(&self) -> String {
        match (&*self.event_name, &self.notification_type) {
            ("Notification", Some(kind)) => format!("Notification:{kind}"),
            _ => self.event_name.clone(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HookInputError {
    #[error("hook input is larger than {limit} bytes; skipped")]
    TooLarge { limit: usize },
    #[error("hook input did not reach end of file within {0:?}; skipped")]
    Timeout(Duration),
    #[error("cannot read hook input: {0}")]
    Read(#[source] std::io::Error),
    #[error("hook input is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error("hook input is not a JSON object")]
    NotObject,
    #[error("hook input has no string hook_event_name; is this run as a Claude Code hook?")]
    MissingEventName,
}

pub fn parse_hook_input(bytes: &[u8]) -> Result<HookInput, HookInputError> {
    if bytes.len() > HOOK_STDIN_CAP_BYTES {
        return Err(HookInputError::TooLarge {
            limit: HOOK_STDIN_CAP_BYTES,
        });
    }
    let value: Value = serde_json::from_slice(bytes).map_err(HookInputError::NotJson)?;
    let Value::Object(object) = value else {
        return Err(HookInputError::NotObject);
    };
    let text = |key: &str| object.get(key).and_then(Value::as_str).map(str::to_owned);
    Ok(HookInput {
        event_name: text("hook_event_name").ok_or(HookInputError::MissingEventName)?,
        session_id: text("session_id"),
        cwd: text("cwd"),
        transcript_path: text("transcript_path"),
        source: text("source"),
        reason: text("reason"),
        notification_type: text("notification_type"),
        stop_hook_active: object.get("stop_hook_active").and_then(Value::as_bool) == Some(true),
        error: text("error"),
        last_assistant_message: text("last_assistant_message"),
        prompt: text("prompt"),
    })
}

/// One matcher group of the settings' `hooks`: `command` run for the events `matcher` picks
/// (`None`: every time, no matcher written).
pub fn hook_group(matcher: Option<&str>, command: &str) -> Value {
    let hook =
        json!({"type": "command", "command": command, "timeout": SETTINGS_HOOK_TIMEOUT_SECS});
    match matcher {
        Some(matcher) => json!({"matcher": matcher, "hooks": [hook]}),
        None => json!({"hooks": [hook]}),
    }
}

/// A Stop hook's answer that keeps Claude Code going with `reason` as its next instruction (it
/// counts towards `CLAUDE_CODE_STOP_HOOK_BLOCK_CAP`, 8 by default).
pub fn keep_going(reason: &str) -> String {
    json!({ "decision": "block", "reason": reason }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_real_payload() {
        let payload = br#"{"session_id":"ac3e","transcript_path":"/t.jsonl","cwd":"/p","hook_event_name":"SessionStart","source":"startup","model":"m"}"#;
        let parsed = parse_hook_input(payload).unwrap();
        assert_eq!(parsed.event_name, "SessionStart");
        assert_eq!(parsed.session_id.as_deref(), Some("ac3e"));
        assert_eq!(parsed.cwd.as_deref(), Some("/p"));
        assert_eq!(parsed.transcript_path.as_deref(), Some("/t.jsonl"));
        assert_eq!(parsed.source.as_deref(), Some("startup"));
    }

    #[test]
    fn rejects_what_is_not_a_hook_payload() {
        assert!(matches!(
            parse_hook_input(b""),
            Err(HookInputError::NotJson(_))
        ));
        assert!(matches!(
            parse_hook_input(b"[1]"),
            Err(HookInputError::NotObject)
        ));
        assert!(matches!(
            parse_hook_input(b"{}"),
            Err(HookInputError::MissingEventName)
        ));
        assert!(matches!(
            parse_hook_input(br#"{"hook_event_name": 5}"#),
            Err(HookInputError::MissingEventName)
        ));
        let huge = vec![b' '; HOOK_STDIN_CAP_BYTES + 1];
        assert!(matches!(
            parse_hook_input(&huge),
            Err(HookInputError::TooLarge { .. })
        ));
    }

    #[test]
    fn non_string_fields_are_treated_as_absent() {
        let parsed =
            parse_hook_input(br#"{"hook_event_name":"Stop","session_id":7,"cwd":null}"#).unwrap();
        assert_eq!(parsed.session_id, None);
        assert_eq!(parsed.cwd, None);
    }

    #[test]
    fn a_recorded_event_reads_back_as_what_it_was() {
        let notification = |kind: &str| HookInput {
            event_name: "Notification".into(),
            notification_type: Some(kind.into()),
            ..HookInput::default()
        };
        let idle = notification(IDLE_PROMPT).recorded_event();
        assert_eq!(idle, "Notification:idle_prompt");
        assert_eq!(HookKind::of_recorded(&idle), HookKind::IdlePrompt);
        let permission = notification("permission_prompt").recorded_event();
        assert_eq!(HookKind::of_recorded(&permission), HookKind::Waiting);
        let stop = HookInput {
            event_name: "Stop".into(),
            ..HookInput::default()
        };
        assert_eq!(stop.recorded_event(), "Stop");
    }
}
