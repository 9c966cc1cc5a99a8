//! The `panes.json` reader run on every mux delivery: no-follow, non-blocking, capped, uncached
//! and lock-free (the writer renames atomically). It never fails: every failure is "unmapped"
//! plus at most one WARNING per condition. Blocking I/O.

use crate::telemetry::warn::Warnings;
use crate::wakedir::panes::{PANES_FILE, parse_target};
use crate::wakedir::target::PaneTarget;
use serde_json::Value;

use crate::wire::json_kind;
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

/// Most characters of `panes.json` read (the reference's cap); a longer file is cut there, so it
/// nearly always reads as unparseable.
pub const PANES_READ_CAP_CHARS: usize = 262_144;
const MAX_UTF8_BYTES_PER_CHAR: usize = 4;

#[derive(Debug, Clone, PartialEq)]
pub enum PanesFile {
    Missing,
    Unreadable(String),
    Unparseable(String),
    /// A panic caught while reading.
    Unexpected(String),
    Parsed(Value),
}

/// Each warn-once condition of the reference reader, its kebab-case name the warn-once key, its
/// message what is logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::IntoStaticStr, strum::EnumMessage)]
#[strum(serialize_all = "kebab-case")]
pub enum Condition {
    #[strum(
        message = "panes.json is not valid JSON; every session reads as unmapped until it is rewritten"
    )]
    Unparseable,
    #[strum(
        message = "panes.json cannot be read; every session reads as unmapped until it is fixed"
    )]
    Unreadable,
    #[strum(message = "panes.json read failed unexpectedly; every session reads as unmapped")]
    Unexpected,
    #[strum(
        message = "panes.json is not a JSON object; every session reads as unmapped until it is rewritten"
    )]
    NotAnObject,
    #[strum(
        message = "panes.json entry is not a pane id; session reads as unmapped (re-run `wakebridge panes set` in its pane)"
    )]
    BadPaneValue,
    #[strum(message = "panes.json entry could not be validated; session reads as unmapped")]
    ParseError,
}

impl Condition {
    /// Conditions of the file as a whole (a missing file re-arms them all); a successful parse
    /// re-arms the first three.
    const FILE: [Condition; 4] = [
        Condition::Unparseable,
        Condition::Unreadable,
        Condition::Unexpected,
        Condition::NotAnObject,
    ];

    /// The warn-once key: file-level conditions are global, entry conditions per session.
    pub fn key(self, session_id: &str) -> String {
        let name: &'static str = self.into();
        if Self::FILE.contains(&self) {
            name.to_owned()
        } else {
            format!("{name}:{session_id}")
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeLevel {
    Warn,
    Debug,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    Mapped(PaneTarget),
    /// No `panes.json`: the quiet normal case for a host that maps nothing.
    FileMissing,
    SessionAbsent,
    Failed {
        condition: Condition,
        level: NoticeLevel,
        detail: String,
    },
}

/// Applies the reference's warn-once and re-arm rules to one read of the file for `session_id`.
pub fn resolve(warned: &Warnings, file: &PanesFile, session_id: &str) -> Resolution {
    let fail = |condition, detail: &str| fail(warned, condition, session_id, detail);
    let rearm_entry = || {
        warned.clear(&Condition::BadPaneValue.key(session_id));
        warned.clear(&Condition::ParseError.key(session_id));
    };
    let value = match file {
        PanesFile::Missing => {
            for condition in Condition::FILE {
                warned.clear(&condition.key(session_id));
            }
            rearm_entry();
            return Resolution::FileMissing;
        }
        PanesFile::Unreadable(detail) => return fail(Condition::Unreadable, detail),
        PanesFile::Unparseable(detail) => return fail(Condition::Unparseable, detail),
        PanesFile::Unexpected(detail) => return fail(Condition::Unexpected, detail),
        PanesFile::Parsed(value) => value,
    };
    for condition in &Condition::FILE[..3] {
        warned.clear(&condition.key(session_id));
    }
    let Some(object) = value.as_object() else {
        let detail = format!("top level is {}, not an object", json_kind(value));
        return fail(Condition::NotAnObject, &detail);
    };
    warned.clear(&Condition::NotAnObject.key(session_id));
    // Key membership, not value: `{"sid": null}` is present-but-bad, not absent.
    let Some(entry) = object.get(session_id) else {
        rearm_entry();
        return Resolution::SessionAbsent;
    };
    match catch_unwind(|| parse_target(entry)) {
        Ok(Ok(target)) => {
            rearm_entry();
            Resolution::Mapped(target)
        }
        Ok(Err(invalid)) => fail(Condition::BadPaneValue, &invalid.to_string()),
        Err(_) => fail(Condition::ParseError, "validating the entry panicked"),
    }
}

fn fail(warned: &Warnings, condition: Condition, session_id: &str, detail: &str) -> Resolution {
    let level = match warned.first(&condition.key(session_id)) {
        true => NoticeLevel::Warn,
        false => NoticeLevel::Debug,
    };
    Resolution::Failed {
        condition,
        level,
        detail: detail.to_owned(),
    }
}

/// The session ids panes.json maps, invalid entries left out (the gate's lookups warn).
pub fn mapped_panes(wake_dir: &Path) -> BTreeMap<String, PaneTarget> {
    match read_panes_file(&wake_dir.join(PANES_FILE), PANES_READ_CAP_CHARS) {
        PanesFile::Parsed(serde_json::Value::Object(map)) => map
            .iter()
            .filter_map(|(sid, v)| parse_target(v).ok().map(|t| (sid.clone(), t)))
            .collect(),
        _ => BTreeMap::new(),
    }
}

/// Reads `path` as the reference does: no-follow, non-blocking (a FIFO returns at once), at most
/// `cap_chars` characters, UTF-8.
pub fn read_panes_file(path: &Path, cap_chars: usize) -> PanesFile {
    let opened = crate::private_fs::open_read(path);
    let file = match opened {
        Ok(file) => file,
        Err(err) if err.kind() == ErrorKind::NotFound => return PanesFile::Missing,
        Err(err) => return PanesFile::Unreadable(err.to_string()),
    };
    let byte_limit = cap_chars
        .saturating_mul(MAX_UTF8_BYTES_PER_CHAR)
        .saturating_add(MAX_UTF8_BYTES_PER_CHAR);
    let mut bytes = Vec::new();
    let byte_limit = u64::try_from(byte_limit).unwrap_or(u64::MAX);
    match file.take(byte_limit).read_to_end(&mut bytes) {
        Ok(_) => {}
        Err(err) if err.kind() == ErrorKind::WouldBlock => {
            return PanesFile::Unparseable(
                "nothing to read without blocking (a FIFO with a writer attached?)".into(),
            );
        }
        Err(err) => return PanesFile::Unreadable(err.to_string()),
    }
    let text = match decode_capped(&bytes, cap_chars) {
        Ok(text) => text,
        Err(err) => return PanesFile::Unparseable(format!("not UTF-8: {err}")),
    };
    match serde_json::from_str::<Value>(text) {
        Ok(value) => PanesFile::Parsed(value),
        Err(err) => PanesFile::Unparseable(format!("invalid JSON: {err}")),
    }
}

/// The first `cap_chars` characters of `bytes` as UTF-8. Bytes past the cap are never judged,
/// as when Python reads a character count from a text stream.
fn decode_capped(bytes: &[u8], cap_chars: usize) -> Result<&str, std::str::Utf8Error> {
    let valid = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(err) => {
            let prefix = std::str::from_utf8(&bytes[..err.valid_up_to()]).unwrap_or_default();
            if prefix.chars().count() < cap_chars {
                return Err(err);
            }
            prefix
        }
    };
    Ok(match valid.char_indices().nth(cap_chars) {
        Some((end, _)) => &valid[..end],
        None => valid,
    })
}

#[derive(Debug)]
pub struct PanesReader {
    path: PathBuf,
    warned: Warnings,
}

impl PanesReader {
    pub fn new(wake_dir: &Path) -> Self {
        Self {
            path: wake_dir.join(PANES_FILE),
            warned: Warnings::default(),
        }
    }

    pub fn lookup(&self, session_id: &str) -> Option<PaneTarget> {
        match self.lookup_detailed(session_id) {
            Resolution::Mapped(target) => Some(target),
            _ => None,
        }
    }

    pub fn lookup_detailed(&self, session_id: &str) -> Resolution {
        let file = catch_unwind(AssertUnwindSafe(|| {
            read_panes_file(&self.path, PANES_READ_CAP_CHARS)
        }))
        .unwrap_or_else(|_| PanesFile::Unexpected("reading panes.json panicked".into()));
        let resolution = resolve(&self.warned, &file, session_id);
        log_resolution(&self.path, session_id, &resolution);
        resolution
    }
}

fn log_resolution(path: &Path, session_id: &str, resolution: &Resolution) {
    let path = path.display();
    let (condition, level, detail) = match resolution {
        Resolution::Mapped(target) => {
            tracing::debug!(session_id, %target, "panes.json maps session");
            return;
        }
        Resolution::FileMissing => return,
        Resolution::SessionAbsent => {
            tracing::debug!(session_id, %path, "session has no panes.json entry; unmapped");
            return;
        }
        Resolution::Failed {
            condition,
            level,
            detail,
        } => (*condition, *level, detail.as_str()),
    };
    let message = strum::EnumMessage::get_message(&condition).unwrap_or_default();
    let key = condition.key(session_id);
    let warn = level == NoticeLevel::Warn;
    crate::warn_or_debug!(warn, session_id, %path, key, reason = detail, "{message}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parsed(value: Value) -> PanesFile {
        PanesFile::Parsed(value)
    }

    fn level(resolution: &Resolution) -> Option<NoticeLevel> {
        match resolution {
            Resolution::Failed { level, .. } => Some(*level),
            _ => None,
        }
    }

    fn warn_count(warned: &Warnings, steps: &[(&PanesFile, &str)]) -> usize {
        steps
            .iter()
            .filter(|(file, sid)| level(&resolve(warned, file, sid)) == Some(NoticeLevel::Warn))
            .count()
    }

    #[test]
    fn not_an_object_read_rearms_the_read_keys() {
        // 11.2 item 64: directory, list, directory -> three warnings.
        let warned = Warnings::default();
        let dir = PanesFile::Unreadable("Is a directory".into());
        let list = parsed(json!(["not", "an", "object"]));
        let steps = [(&dir, "t"), (&list, "t"), (&dir, "t")];
        assert_eq!(warn_count(&warned, &steps), 3);
    }

    #[test]
    fn unparseable_warns_once_and_rearms_on_health_or_missing_file() {
        // 11.2 item 65.
        let warned = Warnings::default();
        let broken = PanesFile::Unparseable("x".into());
        let healthy = parsed(json!({}));
        let unreadable = PanesFile::Unreadable("dir".into());
        let levels: Vec<_> = [
            &broken,
            &broken,
            &healthy,
            &broken,
            &PanesFile::Missing,
            &broken,
            &unreadable,
        ]
        .iter()
        .map(|file| level(&resolve(&warned, file, "t")))
        .collect();
        use NoticeLevel::*;
        assert_eq!(
            levels,
            [
                Some(Warn),
                Some(Debug),
                None,
                Some(Warn),
                None,
                Some(Warn),
                Some(Warn)
            ]
        );
    }

    #[test]
    fn unexpected_failure_warns_then_debugs_until_a_healthy_read() {
        // 11.2 item 66.
        let warned = Warnings::default();
        let odd = PanesFile::Unexpected("boom".into());
        let healthy = parsed(json!({"target-1": "%0"}));
        assert_eq!(
            level(&resolve(&warned, &odd, "target-1")),
            Some(NoticeLevel::Warn)
        );
        assert_eq!(
            level(&resolve(&warned, &odd, "target-1")),
            Some(NoticeLevel::Debug)
        );
        assert!(matches!(
            resolve(&warned, &healthy, "target-1"),
            Resolution::Mapped(_)
        ));
        assert_eq!(
            level(&resolve(&warned, &odd, "target-1")),
            Some(NoticeLevel::Warn)
        );
    }

    #[test]
    fn bad_values_warn_once_per_session_and_rearm_when_absent_or_file_missing() {
        // 11.2 item 67.
        let warned = Warnings::default();
        let null = parsed(json!({"target-1": null}));
        let zero = parsed(json!({"target-1": 0}));
        let empty = parsed(json!({"target-1": ""}));
        let absent = parsed(json!({}));
        let steps = [
            (&null, "target-1"),
            (&zero, "target-1"),
            (&empty, "target-1"),
        ];
        assert_eq!(warn_count(&warned, &steps), 1);
        let steps = [(&absent, "target-1"), (&null, "target-1")];
        assert_eq!(warn_count(&warned, &steps), 1);
        let steps = [(&PanesFile::Missing, "target-1"), (&zero, "target-1")];
        assert_eq!(warn_count(&warned, &steps), 1);
    }

    #[test]
    fn bad_value_reason_quotes_the_value() {
        let warned = Warnings::default();
        match resolve(&warned, &parsed(json!({"target-1": "%0\u{0}"})), "target-1") {
            Resolution::Failed {
                condition: Condition::BadPaneValue,
                detail,
                ..
            } => assert!(detail.contains("not a pane id") && detail.contains("\\u0000")),
            other => panic!("expected a bad pane value, got {other:?}"),
        }
    }

    #[test]
    fn interleaved_sessions_do_not_rearm_each_other() {
        // 11.2 item 69.
        let warned = Warnings::default();
        let file = parsed(json!({"target-1": null, "target-2": "%2"}));
        let mut warnings = 0;
        for _ in 0..3 {
            for sid in ["target-1", "other-session", "target-2"] {
                let resolution = resolve(&warned, &file, sid);
                if sid == "target-2" {
                    assert!(matches!(resolution, Resolution::Mapped(_)));
                }
                if level(&resolution) == Some(NoticeLevel::Warn) {
                    warnings += 1;
                }
            }
        }
        assert_eq!(warnings, 1);
    }

    #[test]
    fn warn_cap_bounds_the_per_session_keys() {
        // 11.2 item 70 with the cap at 2.
        let warned = Warnings::with_cap(2);
        let file = parsed(json!({"s1": null, "s2": null, "s3": null}));
        let mut warnings = 0;
        for sid in ["s1", "s2", "s3", "s1"] {
            if level(&resolve(&warned, &file, sid)) == Some(NoticeLevel::Warn) {
                warnings += 1;
            }
            assert!(warned.remembered() <= 2);
        }
        assert_eq!(warnings, 4);
    }

    #[test]
    fn decode_judges_only_the_characters_within_the_cap() {
        assert_eq!(decode_capped("süß{}".as_bytes(), 3), Ok("süß"));
        assert_eq!(decode_capped(b"{}", 64), Ok("{}"));
        assert!(decode_capped(b"\xff\xfe{}", 64).is_err());
        assert_eq!(decode_capped(b"ab\xff", 2), Ok("ab"));
    }

    #[test]
    fn reader_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<PanesReader>();
    }
}
