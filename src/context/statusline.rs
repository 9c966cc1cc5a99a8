//! The status-line side of the context monitor: a status line's figures ([`Feed`], read from
//! the agent's JSON by `cli::statusline`) kept in a per-session feed file the daemon prefers
//! while fresh, and the short line the agent shows (`ctx 42% · idle`, plus a used-up limit),
//! after the user's own line when it wraps one. Any input yields a line.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::statefile::{StateFileError, atomic_write};
use super::window::percent;
use crate::clock::now_ms;
use crate::reading::limit::describe_reset;
use crate::wakedir::markers;
use crate::wire::session_id::SessionId;

/// The directory of the per-session feed files under `state_dir`.
pub fn feed_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("feed")
}
/// Most bytes read from stdin: real payloads are ~2 KB; this bounds a runaway writer.
pub const MAX_STATUSLINE_INPUT: u64 = 256 * 1024;
/// A feed stamped this far in the future (clock stepped back) is still accepted.
const FUTURE_SLACK_SECS: u64 = 5;
/// What the line shows when no percentage is known.
pub const UNKNOWN_LINE: &str = "ctx ?";
/// How long the user's own status-line command may run: a cold `npx ccstatusline` starts in
/// about a second, and the status bar must never wait on a hung one (it is killed).
pub const WRAPPED_BUDGET: Duration = Duration::from_secs(2);
const SEPARATOR: &str = " · ";

pub use crate::reading::transcript::Usage as FeedUsage;

/// The context figures of one status-line run, as stored in the feed file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Feed {
    pub session_id: String,
    pub model_id: Option<String>,
    pub used_percentage: Option<f64>,
    pub current_usage: Option<FeedUsage>,
    pub context_window_size: Option<u64>,
    pub exceeds_200k_tokens: Option<bool>,
    pub transcript_path: Option<PathBuf>,
    /// Unix seconds when the status line ran.
    pub timestamp: u64,
    /// A `rate_limits` window that is used up (subscribers only).
    #[serde(default)]
    pub limit: Option<FeedLimit>,
    /// Its account's usage windows (kept in `budget/`, not in the feed).
    #[serde(skip)]
    pub budget: Option<crate::budget::Account>,
}

/// A used-up usage-limit window of the status line's `rate_limits`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedLimit {
    pub kind: String,
    pub resets_at_ms: Option<i64>,
}

impl Feed {
    pub fn used_tokens(&self) -> Option<u64> {
        self.current_usage.map(|u| u.context_tokens())
    }

    /// Percentage: computed from usage and window when both are known (one decimal), else
    /// Claude Code's own `used_percentage`.
    pub fn percent(&self) -> Option<f64> {
        match (self.used_tokens(), self.context_window_size) {
            (Some(used), Some(window)) if window > 0 => Some(percent(used, window)),
            _ => self
                .used_percentage
                .filter(|p| p.is_finite())
                .map(|p| p.clamp(0.0, 100.0)),
        }
    }
}

/// Whether the session is in a turn, from its busy marker (shown lower-case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
pub enum Activity {
    Idle,
    Busy,
}

pub fn feed_path(state_dir: &Path, session_id: &str) -> Result<PathBuf, StateFileError> {
    if !SessionId::is_valid(session_id) {
        return Err(StateFileError::BadSessionId(session_id.to_owned()));
    }
    Ok(feed_dir(state_dir).join(format!("{session_id}.json")))
}

pub fn write_feed(state_dir: &Path, feed: &Feed) -> Result<(), StateFileError> {
    let path = feed_path(state_dir, &feed.session_id)?;
    // Serialising plain data cannot fail; an empty body would only make the feed unreadable.
    atomic_write(&path, &serde_json::to_vec(feed).unwrap_or_default())
}

/// The session's feed if it exists, parses, and is at most `max_age` old (by its timestamp).
pub fn read_feed(state_dir: &Path, session_id: &str, max_age: Duration) -> Option<Feed> {
    read_feed_at(state_dir, session_id, max_age, crate::clock::now_s())
}

pub fn read_feed_at(
    state_dir: &Path,
    session_id: &str,
    max_age: Duration,
    now: u64,
) -> Option<Feed> {
    let body = read_bounded(std::fs::File::open(feed_path(state_dir, session_id).ok()?).ok()?);
    let feed: Feed = serde_json::from_slice(&body).ok()?;
    let fresh = feed.timestamp <= now.saturating_add(FUTURE_SLACK_SECS)
        && now.saturating_sub(feed.timestamp) <= max_age.as_secs();
    (fresh && feed.session_id == session_id).then_some(feed)
}

/// Busy while the session's busy marker is younger than `ttl` ([`markers::is_busy`]).
pub fn marker_activity(wake_dir: &Path, session_id: &str, ttl: Duration) -> Activity {
    let busy = SessionId::is_valid(session_id)
        && markers::is_busy(wake_dir, session_id, ttl.as_secs_f64());
    if busy { Activity::Busy } else { Activity::Idle }
}

/// The status line: `ctx 42%`, `ctx 42% · busy`, or `ctx ?` when nothing is known.
pub fn render_line(feed: Option<&Feed>, activity: Option<Activity>) -> String {
    let mut parts = vec![match feed.and_then(Feed::percent) {
        Some(p) => format!("ctx {}%", p.round() as u32),
        None => UNKNOWN_LINE.to_owned(),
    }];
    parts.extend(activity.map(|a| <&str>::from(a).to_owned()));
    if let Some(limit) = feed.and_then(|f| f.limit.as_ref()) {
        let local = jiff::tz::TimeZone::system();
        let reset = describe_reset(limit.resets_at_ms, now_ms(), &local);
        parts.push(format!("{} hit, {reset}", limit.kind));
    }
    parts.join(SEPARATOR)
}

/// The line when wakebridge wraps the user's own command: their output (a trailing newline
/// dropped), then ours, with the terminal's colours reset first when theirs used any.
pub fn wrapped_line(theirs: Option<&[u8]>, ours: &str) -> String {
    let theirs = theirs.map(String::from_utf8_lossy);
    let theirs = theirs.as_deref().map(|t| t.trim_end_matches(['\n', '\r']));
    match theirs {
        Some(theirs) if !theirs.trim().is_empty() => {
            let reset = theirs.contains('\u{1b}').then_some(ANSI_RESET);
            let reset = reset.unwrap_or_default();
            format!("{theirs}{reset}{SEPARATOR}{ours}")
        }
        _ => ours.to_owned(),
    }
}

/// SGR reset: our segment is not shown in whatever colour the user's line ended with.
const ANSI_RESET: &str = "\u{1b}[0m";

pub fn read_bounded(input: impl Read) -> Vec<u8> {
    let mut buf = Vec::new();
    // A read error leaves what was read so far: still worth a try.
    let _ = input.take(MAX_STATUSLINE_INPUT).read_to_end(&mut buf);
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrapped_line_keeps_theirs_and_adds_ours() {
        assert_eq!(
            wrapped_line(Some(b"Opus | main\n"), "ctx 4%"),
            "Opus | main · ctx 4%"
        );
        assert_eq!(
            wrapped_line(Some(b"one\ntwo\r\n"), "ctx ?"),
            "one\ntwo · ctx ?"
        );
        assert_eq!(
            wrapped_line(Some(b"\x1b[32mgreen"), "ctx ?"),
            "\x1b[32mgreen\x1b[0m · ctx ?"
        );
        for nothing in [None, Some(&b""[..]), Some(&b" \n"[..])] {
            assert_eq!(wrapped_line(nothing, "ctx ?"), "ctx ?");
        }
    }

    #[test]
    fn marker_age_decides_activity() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        assert_eq!(
            marker_activity(dir.path(), "s", Duration::from_secs(3600)),
            Activity::Idle
        );
        let marker = std::fs::File::create(dir.path().join("s.busy"))?;
        assert_eq!(
            marker_activity(dir.path(), "s", Duration::from_secs(3600)),
            Activity::Busy
        );
        marker.set_modified(std::time::SystemTime::now() - Duration::from_secs(7200))?;
        assert_eq!(
            marker_activity(dir.path(), "s", Duration::from_secs(3600)),
            Activity::Idle
        );
        Ok(())
    }
}
