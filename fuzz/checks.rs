//! The bodies of the fuzz targets, as plain functions over bytes, shared by two runners: the
//! libFuzzer binaries in `fuzz/fuzz_targets/` (nightly, `cargo fuzz run <target>`) and the
//! stable in-suite smoke test `tests/it/fuzz_smoke.rs` (corpus replay plus mutated inputs), which
//! include this file with `#[path]`. Each function feeds one input to one parser of untrusted
//! bytes and asserts invariants beyond "did not panic": a panic here is a finding.
//!
//! It uses only crates both runners have (wakebridge, serde_json, sha2, hex, tempfile).

use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::Value;
use wakebridge::claude::hooks::{HOOK_STDIN_CAP_BYTES, HookInputError, parse_hook_input};
use wakebridge::cli::hook::{HookAction, action_for};
use wakebridge::config::hosts::{HostAllowlist, canonical_entry, canonical_host};
use wakebridge::telemetry::warn::Warnings;
use wakebridge::wakedir::printable::is_valid_string;
use wakebridge::wakedir::reader::{NoticeLevel, PanesFile, Resolution, read_panes_file, resolve};
use wakebridge::wakedir::target::PaneTarget;
use wakebridge::wakedir::{PANES_READ_CAP_CHARS, entry_json, parse_target};
use wakebridge::wire::event::{self, EventError, Triage};
use wakebridge::wire::session_id::{MAX_SESSION_ID_LEN, SessionId};

/// The `session:` channel prefix the bus uses for DMs.
const SESSION_PREFIX: &str = "session:";
/// A read cap far below the real one, so cut-at-the-cap paths are reached by small inputs.
const SMALL_READ_CAP_CHARS: usize = 24;
/// Most object keys of a parsed `panes.json` also looked up as session ids (bounds the work of
/// one input).
const MAX_KEYS_RESOLVED: usize = 16;

/// Hook body parser (`event::triage`): a delivered event names a charset-safe target, its spool
/// line is one line of printable-ASCII JSON ending in `\n` that re-parses to the same value and
/// is a fixed point of triage, and its identity is the body's digest.
pub fn event_triage(body: &[u8]) {
    let parsed = serde_json::from_slice::<Value>(body);
    let triage = event::triage(body);
    match (&triage, &parsed) {
        (Err(EventError::InvalidJson), Ok(_)) => panic!("triage refused JSON serde_json accepts"),
        (Err(EventError::InvalidJson), Err(_)) => return,
        (_, Err(_)) => panic!("triage accepted bytes serde_json refuses: {triage:?}"),
        _ => {}
    }
    let Ok(value) = parsed else { return };
    match triage {
        Err(EventError::InvalidJson) => {}
        Err(EventError::NotObject) => assert!(!value.is_object(), "object reported as not one"),
        Err(EventError::NotSerializable) => {
            assert!(value.is_object());
            assert!(
                has_non_finite_number(&value),
                "NotSerializable without an overflowing number"
            );
        }
        Ok(Triage::BelowActionable { has_level }) => {
            let level = value.get("signal_level");
            assert_ne!(level.and_then(Value::as_str), Some("actionable"));
            assert_eq!(has_level, !matches!(level, None | Some(Value::Null)));
        }
        Ok(Triage::NoTarget { unsafe_channel }) => {
            assert_eq!(
                value.get("signal_level").and_then(Value::as_str),
                Some("actionable")
            );
            let channel = value.get("channel").and_then(Value::as_str);
            match unsafe_channel {
                Some(reported) => {
                    assert_eq!(Some(reported.as_str()), channel);
                    let id = reported
                        .strip_prefix(SESSION_PREFIX)
                        .expect("unsafe channel is a session channel");
                    assert!(
                        !SessionId::is_valid(id),
                        "safe id reported as unsafe: {id:?}"
                    );
                }
                None => assert!(
                    channel.is_none_or(|c| !c.starts_with(SESSION_PREFIX)),
                    "a session channel without a target and without a warning: {channel:?}"
                ),
            }
        }
        Ok(Triage::Deliver(delivered)) => {
            assert_target_is_a_safe_file_name(&delivered.target);
            assert_eq!(
                value.get("channel").and_then(Value::as_str),
                Some(format!("{SESSION_PREFIX}{}", delivered.target).as_str())
            );
            let line = delivered.line.as_str();
            let Some(json_text) = line.strip_suffix('\n') else {
                panic!("spool line does not end in a newline: {line:?}");
            };
            assert!(
                json_text.bytes().all(|b| (b' '..=b'~').contains(&b)),
                "spool line is not one line of printable ASCII: {line:?}"
            );
            let reparsed: Value =
                serde_json::from_str(json_text).expect("spool line re-parses as JSON");
            assert!(
                same_json(&value, &reparsed),
                "spool line changed the value:\n body {value}\n line {reparsed}"
            );
            match event::triage(json_text.as_bytes()) {
                Ok(Triage::Deliver(again)) => {
                    assert_eq!(
                        again.line, delivered.line,
                        "spool line is not a fixed point"
                    );
                    assert_eq!(again.target, delivered.target);
                    assert_eq!(again.event_id, delivered.event_id);
                    assert_eq!(again.sender, delivered.sender);
                }
                other => panic!("the spool line no longer triages as a delivery: {other:?}"),
            }
            assert_eq!(delivered.identity, sha256_hex(body));
            if let Some(Value::String(id)) = value.get("event_id") {
                assert_eq!(delivered.event_id.as_deref(), Some(id.as_str()));
            }
        }
    }
}

/// `panes.json` reader: `bytes` become the file, read with the real cap and a tiny one; every
/// key of the object (and some fixed ids) is resolved. A mapped pane is always a valid
/// (non-empty, printable) string that survives the writer's round trip, and a repeated failure
/// is reported once as a WARNING, then at debug level.
pub fn panes_reader(bytes: &[u8]) {
    let path = scratch_dir().join(format!("panes-{:?}.json", std::thread::current().id()));
    if std::fs::write(&path, bytes).is_err() {
        return;
    }
    for cap in [PANES_READ_CAP_CHARS, SMALL_READ_CAP_CHARS] {
        let file = read_panes_file(&path, cap);
        if let PanesFile::Parsed(value) = &file
            && cap == PANES_READ_CAP_CHARS
            && bytes.len() < cap
        {
            let direct: Value = serde_json::from_slice(bytes).expect("file parsed, bytes not");
            assert_eq!(&direct, value);
        }
        let mut ids: Vec<String> = ["target-1", "", "../x", "%0"].map(String::from).to_vec();
        if let PanesFile::Parsed(Value::Object(map)) = &file {
            ids.extend(map.keys().take(MAX_KEYS_RESOLVED).cloned());
        }
        let warned = Warnings::default();
        for sid in &ids {
            let first = resolve(&warned, &file, sid);
            let second = resolve(&warned, &file, sid);
            match (&first, &second) {
                (Resolution::Mapped(a), Resolution::Mapped(b)) => {
                    assert_eq!(a, b);
                    assert_pane_is_typable(a);
                    let entry = file_entry(&file, sid);
                    assert_eq!(parse_target(&entry_json(a)).as_ref(), Ok(a));
                    assert_eq!(parse_target(&entry).as_ref(), Ok(a));
                }
                (
                    Resolution::Failed {
                        condition: c1,
                        level: l1,
                        ..
                    },
                    Resolution::Failed {
                        condition: c2,
                        level: l2,
                        ..
                    },
                ) => {
                    assert_eq!(c1, c2);
                    assert_eq!(*l2, NoticeLevel::Debug, "a repeat must not warn again");
                    let _ = l1;
                }
                (a, b) => assert_eq!(a, b, "resolution changed between two identical reads"),
            }
        }
    }
    let _ = std::fs::remove_file(&path);
}

/// Claude Code hook stdin: an accepted payload is a JSON object whose string fields are the
/// ones returned, and the event → action table matches the documented events.
pub fn hook_input(bytes: &[u8]) {
    let result = parse_hook_input(bytes);
    if bytes.len() > HOOK_STDIN_CAP_BYTES {
        assert!(matches!(result, Err(HookInputError::TooLarge { .. })));
        return;
    }
    let parsed = serde_json::from_slice::<Value>(bytes);
    let input = match (result, parsed) {
        (Err(HookInputError::NotJson(_)), Err(_)) => return,
        (Err(HookInputError::NotObject), Ok(value)) => {
            assert!(!value.is_object());
            return;
        }
        (Err(HookInputError::MissingEventName), Ok(value)) => {
            assert!(
                value
                    .get("hook_event_name")
                    .and_then(Value::as_str)
                    .is_none()
            );
            return;
        }
        (Ok(input), Ok(value)) => {
            let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
            assert_eq!(Some(input.event_name.clone()), text("hook_event_name"));
            assert_eq!(input.session_id, text("session_id"));
            assert_eq!(input.cwd, text("cwd"));
            assert_eq!(input.transcript_path, text("transcript_path"));
            assert_eq!(input.source, text("source"));
            assert_eq!(input.notification_type, text("notification_type"));
            input
        }
        (result, parsed) => panic!("parser and serde_json disagree: {result:?} vs {parsed:?}"),
    };
    let expected = match input.event_name.as_str() {
        "SessionStart" => HookAction::MapPane {
            keep_wake_state: input.source.as_deref() == Some("compact"),
        },
        "UserPromptSubmit" | "PreToolUse" => HookAction::MarkBusy,
        "Stop" | "StopFailure" => HookAction::MarkIdle,
        "Notification" if input.notification_type.as_deref() == Some("idle_prompt") => {
            HookAction::MarkIdle
        }
        "SessionEnd" => HookAction::ClearPane,
        _ => HookAction::Ignore,
    };
    assert_eq!(action_for(&input), expected);
}

/// Host canonicaliser and allowlist. The input is split at the first newline: the first part
/// is a `Host` header value, the rest (split on `,`) an operator's allowlist entries.
pub fn host_allowlist(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let (raw, entries) = text.split_once('\n').unwrap_or((&text, ""));
    let host = canonical_host(raw);
    assert_eq!(
        host,
        host.to_ascii_lowercase(),
        "canonical form is lowercase"
    );
    // A canonical name without ':' or a leading '[' is a fixed point; a canonical IPv6 literal
    // is one once bracketed again, with or without a port.
    if !host.contains(':') && !host.starts_with('[') {
        assert_eq!(canonical_host(&host), host, "not idempotent for {raw:?}");
        if !host.is_empty() {
            assert_eq!(canonical_host(&format!("{host}:8082")), host);
        }
    }
    if host.parse::<std::net::Ipv6Addr>().is_ok() {
        assert_eq!(canonical_host(&format!("[{host}]")), host);
        assert_eq!(canonical_host(&format!("[{host}]:443")), host);
    }
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        assert_eq!(
            host,
            ip.to_string(),
            "IP literal not in its canonical spelling"
        );
    }
    let canon_entries: Vec<String> = entries.split(',').filter_map(canonical_entry).collect();
    for entry in entries.split(',') {
        match canonical_entry(entry) {
            None => assert!(entry.trim().is_empty()),
            Some(c) => assert_eq!(c, c.to_ascii_lowercase()),
        }
    }
    let list = HostAllowlist::new(canon_entries.iter().cloned());
    assert!(!list.allows(""), "a missing Host must never be allowed");
    assert!(
        list.iter().all(|h| !h.is_empty()),
        "an empty entry was kept"
    );
    let allowed = list.allows(raw);
    assert_eq!(
        allowed,
        !host.is_empty() && canon_entries.contains(&host),
        "allows() disagrees with canonical_host for {raw:?}"
    );
    if host.is_empty() {
        assert!(!allowed);
    }
    let own = HostAllowlist::new([host.clone()]);
    assert_eq!(own.allows(raw), !host.is_empty());
}

/// A delivered target must be usable as a file name inside the wake dir and nowhere else.
fn assert_target_is_a_safe_file_name(target: &str) {
    assert!(SessionId::is_valid(target), "unsafe target {target:?}");
    assert!(!target.is_empty() && target.len() <= MAX_SESSION_ID_LEN);
    assert!(
        target
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
        "target outside [A-Za-z0-9_-]: {target:?}"
    );
    let base = std::path::Path::new("/wake");
    let joined = base.join(format!("{target}.jsonl"));
    assert_eq!(
        joined.parent(),
        Some(base),
        "{target:?} escapes the wake dir"
    );
}

/// A mapped pane becomes a multiplexer argument: it must be non-empty and printable.
fn assert_pane_is_typable(target: &PaneTarget) {
    assert!(is_valid_string(target.pane()), "pane {:?}", target.pane());
    if let PaneTarget::Zellij { session, .. } = target {
        assert!(is_valid_string(session), "zellij session {session:?}");
    }
    if let PaneTarget::Tmux {
        session: Some(session),
        ..
    } = target
    {
        assert!(is_valid_string(session), "tmux session {session:?}");
    }
}

fn file_entry(file: &PanesFile, sid: &str) -> Value {
    match file {
        PanesFile::Parsed(Value::Object(map)) => map.get(sid).cloned().unwrap_or(Value::Null),
        _ => Value::Null,
    }
}

/// JSON equality where numbers compare by value the way Python reads them: integers by their
/// digits (`-0` is `0`), anything with a fraction or exponent as an `f64`.
pub fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => same_number(x.as_str(), y.as_str()),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_json(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((k1, v1), (k2, v2))| k1 == k2 && same_json(v1, v2))
        }
        _ => a == b,
    }
}

fn same_number(x: &str, y: &str) -> bool {
    let is_float = |s: &str| s.contains(['.', 'e', 'E']);
    match (is_float(x), is_float(y)) {
        (false, false) => {
            let norm = |s: &str| {
                if s == "-0" {
                    "0".to_string()
                } else {
                    s.to_string()
                }
            };
            norm(x) == norm(y)
        }
        (true, true) => match (x.parse::<f64>(), y.parse::<f64>()) {
            (Ok(p), Ok(q)) => p == q && p.is_sign_negative() == q.is_sign_negative(),
            _ => false,
        },
        _ => false,
    }
}

fn has_non_finite_number(value: &Value) -> bool {
    match value {
        Value::Number(n) => {
            let text = n.as_str();
            text.contains(['.', 'e', 'E']) && !text.parse::<f64>().is_ok_and(f64::is_finite)
        }
        Value::Array(items) => items.iter().any(has_non_finite_number),
        Value::Object(map) => map.values().any(has_non_finite_number),
        _ => false,
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// One private directory per process for the files the panes target writes.
fn scratch_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("wakebridge-fuzz-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        dir
    })
}

/// Removes the panes target's scratch directory (the smoke test calls it when done).
pub fn remove_scratch_dir() {
    let _ = std::fs::remove_dir_all(scratch_dir());
}
