//! One session's context as the session loop follows it: its transcript follower, the figures
//! it and a fresh status-line feed give, the warning thresholds, the usage limits they show, and
//! what its state file last said. [`Followed::refresh`] does the blocking reads; the loop calls
//! it off the async threads, then decides on what it found.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::agent::Agent;
use crate::api;
use crate::budget;
use crate::clock;
use crate::context::follow::{PollEvent, TranscriptFollower};
use crate::context::statefile::{StateStamp, write_state};
use crate::context::statusline::{Feed, read_feed};
use crate::context::thresholds::SessionThresholds;
use crate::context::{ContextConfig, ContextFigures, figures};
use crate::reading::transcript::UsageWindows;
use crate::store::{LimitSeen, LimitSource, Record};

/// Everything known about one session's context window.
#[derive(Debug, Default)]
pub struct Followed {
    /// The transcript path the hook reported.
    hint: Option<PathBuf>,
    /// The agent whose transcript it is (`None`: not told yet, read as Claude Code's).
    agent: Option<Agent>,
    /// The usage windows last recorded from the transcript (Codex's reports them).
    windows_recorded: Option<UsageWindows>,
    follower: Option<TranscriptFollower>,
    last_event: Option<PollEvent>,
    pub thresholds: SessionThresholds,
    figures: Option<ContextFigures>,
    /// Newest of the transcript's mtime and the feed's timestamp.
    active_at: Option<SystemTime>,
    written: Option<StateStamp>,
    /// The level last told, and when.
    last_warning: Option<(String, SystemTime)>,
    /// The offset of the usage-limit notice last recorded from the transcript, and the reset of
    /// the one last recorded from the feed: each is recorded once.
    notice_recorded: Option<u64>,
    feed_reset_recorded: Option<i64>,
    /// Reading the transcript or writing the state file failed, and it was warned about: the
    /// next failure is debug until one works again.
    warned: bool,
}

impl Followed {
    pub fn new(config: &ContextConfig) -> Self {
        Self {
            thresholds: SessionThresholds::new(config.thresholds.clone()),
            ..Self::default()
        }
    }

    /// Takes the transcript path the hook last reported and the session's agent, who wrote it;
    /// a new one (a resume into another file) is looked up again.
    pub fn hinted(&mut self, hint: Option<&str>, agent: Agent) {
        let hint = hint.filter(|p| !p.trim().is_empty()).map(PathBuf::from);
        if self.agent != Some(agent) {
            self.agent = Some(agent);
            self.follower = None;
        }
        if hint.is_some() && self.hint != hint {
            self.hint = hint;
            self.follower = None;
        }
    }

    /// Reads what is new in the transcript and the feed (finding the transcript first when it
    /// is not followed yet, or was missing, on a `full` look): the figures, the thresholds, and
    /// the usage limits seen that are not recorded yet. Blocking I/O.
    pub fn refresh(&mut self, sid: &str, config: &ContextConfig, full: bool) -> Vec<Record> {
        let feed = read_feed(&config.state_dir, sid, config.feed_max_age);
        if full && (self.follower.is_none() || self.last_event == Some(PollEvent::Missing)) {
            let feed_hint = feed.as_ref().and_then(|f| f.transcript_path.clone());
            self.locate(&config.homes, sid, feed_hint);
        }
        if let Some(polled) = self.follower.as_mut().map(TranscriptFollower::poll) {
            self.troubled(sid, "cannot follow the transcript", polled.as_ref().err());
            if let Ok(outcome) = polled {
                self.last_event = Some(outcome.event);
                if !matches!(outcome.event, PollEvent::Unchanged | PollEvent::Missing)
                    && let Some(path) = self.transcript()
                    && let Ok(modified) = std::fs::metadata(path).and_then(|m| m.modified())
                {
                    self.active_at = self.active_at.max(Some(modified));
                }
            }
        }
        if let Some(f) = &feed {
            self.active_at = self.active_at.max(Some(clock::from_s(f.timestamp)));
        }
        self.record_windows(sid, config);
        let seen = self.limits_seen(sid, feed.as_ref());
        let reading = self.follower.as_ref().and_then(|f| f.current());
        let figures = figures(reading, feed.as_ref(), &config.resolver);
        if let Some(pct) = figures.percent {
            self.thresholds.observe(pct);
        }
        self.figures = Some(figures);
        seen
    }

    /// Finds the session's transcript; keeps the follower when the path is unchanged.
    fn locate(&mut self, homes: &[PathBuf], sid: &str, feed_hint: Option<PathBuf>) {
        let hint = self.hint.clone().or(feed_hint);
        let path = self
            .agent
            .unwrap_or_default()
            .side()
            .transcript_of(homes, sid, hint);
        let Some(path) = path else { return };
        if self.transcript() != Some(path.as_path()) {
            tracing::debug!(session_id = sid, transcript = %path.display(), "following transcript");
            self.follower = Some(TranscriptFollower::new(
                path,
                self.agent.unwrap_or_default(),
            ));
            self.last_event = None;
        }
    }

    /// What the transcript and feed say about a usage limit not recorded yet: a notice (unless
    /// its reset is past), a response after it (the limit lifted), a used-up `rate_limits`
    /// window.
    fn limits_seen(&mut self, sid: &str, feed: Option<&Feed>) -> Vec<Record> {
        let now_ms = clock::now_ms();
        let mut seen = Vec::new();
        match self.follower.as_ref().and_then(|f| f.limit()) {
            Some(limit) if self.notice_recorded != Some(limit.offset) => {
                self.notice_recorded = Some(limit.offset);
                let at_ms = limit.found.at_ms.unwrap_or(now_ms);
                let notice = limit.found.notice.clone();
                // The record's exact reset, where it has one, over the minute its text shows.
                let found = LimitSeen::of_notice(sid, notice, LimitSource::Transcript, at_ms, true)
                    .with_exact_reset(limit.found.resets_at_ms);
                if found.resets_at_ms.is_none_or(|at| at > now_ms) {
                    seen.push(Record::Limited(found));
                }
            }
            None if self.notice_recorded.take().is_some() => seen.push(Record::LimitLifted {
                session_id: sid.to_owned(),
            }),
            _ => {}
        }
        if let Some(limit) = feed.and_then(|f| f.limit.as_ref())
            && self.feed_reset_recorded != limit.resets_at_ms
            && limit.resets_at_ms.is_none_or(|at| at > now_ms)
        {
            self.feed_reset_recorded = limit.resets_at_ms;
            // The feed's reset is exact to the second: nothing to read in a time zone.
            let kind = limit.kind.clone();
            let notice = crate::reading::limit::Notice { kind, resets: None };
            let found = LimitSeen::of_notice(sid, notice, LimitSource::Statusline, now_ms, true)
                .with_exact_reset(limit.resets_at_ms);
            seen.push(Record::Limited(found));
        }
        seen
    }

    /// Records the account's usage windows where the transcript reports them (Codex's), as a
    /// status line records Claude Code's: the budget reads them the same way.
    fn record_windows(&mut self, sid: &str, config: &ContextConfig) {
        let windows = self.follower.as_ref().and_then(TranscriptFollower::windows);
        let (Some(windows), Some(agent)) = (windows, self.agent) else {
            return;
        };
        if self.windows_recorded == Some(windows) {
            return;
        }
        let Some(account) = self.transcript().and_then(|t| agent.side().account_of(t)) else {
            return;
        };
        let seen_ms = clock::now_ms();
        let window = |reading: Option<(f64, Option<i64>)>| {
            reading.map(|(used_percentage, resets_at_ms)| budget::Window {
                used_percentage,
                resets_at_ms,
                seen_ms,
            })
        };
        let reading = budget::Account {
            account,
            five_hour: window(windows.five_hour),
            seven_day: window(windows.seven_day),
        };
        let recorded = budget::record(&config.state_dir, &reading);
        self.troubled(
            sid,
            "cannot record the usage windows",
            recorded.as_ref().err(),
        );
        if recorded.is_ok() {
            self.windows_recorded = Some(windows);
        }
    }

    /// Warns of a failure once until something works again.
    fn troubled(&mut self, sid: &str, what: &str, error: Option<&impl std::fmt::Display>) {
        match error {
            None => self.warned = false,
            Some(error) => {
                let first = !std::mem::replace(&mut self.warned, true);
                crate::warn_or_debug!(first, session_id = sid, error = %error, "{what}");
            }
        }
    }

    /// The level `name` was told just now.
    pub fn warned(&mut self, name: &str) {
        self.last_warning = Some((name.to_owned(), SystemTime::now()));
    }

    /// The transcript it follows.
    pub fn transcript(&self) -> Option<&Path> {
        self.follower.as_ref().map(TranscriptFollower::path)
    }

    pub fn percent(&self) -> Option<f64> {
        self.figures.as_ref()?.percent
    }

    /// The `context` of `/sessions` and `wakebridge status`.
    pub fn status(&self) -> Option<api::Context> {
        let f = self.figures.as_ref()?;
        let at = clock::shown;
        Some(api::Context {
            percent: f.percent,
            used_tokens: f.used_tokens,
            context_window: f.context_window,
            model: f.model.clone(),
            source: <&str>::from(f.window_source).to_owned(),
            usage_source: f.usage_source.map(|u| <&str>::from(u).to_owned()),
            transcript: self.transcript().map(|p| p.display().to_string()),
            updated_at: self.active_at.and_then(at),
            pending_warning: self.thresholds.due().map(|l| l.name),
            last_warning: self.last_warning.as_ref().map(|(level, _)| level.clone()),
            last_warning_at: self.last_warning.as_ref().and_then(|(_, t)| at(*t)),
        })
    }
}

/// Writes the state files whose whole percent or minute changed, and the "latest" file for the
/// most recently active session (when `[context] latest_state_file` names one). A file's
/// `TIMESTAMP` is when its figure was read from the session (the transcript's or the feed's
/// last change), so a session at rest costs no write. Blocking I/O.
pub fn write_state_files<'a>(
    sessions: impl IntoIterator<Item = (&'a str, &'a mut Followed)>,
    config: &ContextConfig,
    latest_before: &mut Option<String>,
) {
    let now_unix = clock::now_s();
    let mut known: Vec<(&str, &mut Followed, f64)> = (sessions.into_iter())
        .filter_map(|(sid, f)| f.percent().map(|pct| (sid, f, pct)))
        .collect();
    let latest = (known.iter())
        .max_by_key(|(sid, f, _)| (f.active_at, std::cmp::Reverse(*sid)))
        .map(|(sid, _, _)| (*sid).to_owned());
    let latest_changed = latest != *latest_before;
    latest_before.clone_from(&latest);
    for (sid, followed, pct) in &mut known {
        let read_at = (followed.active_at)
            .and_then(|at| at.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(now_unix, |since| since.as_secs());
        let stamp = StateStamp::of(*pct, read_at);
        let is_latest = latest.as_deref() == Some(*sid);
        if followed.written == Some(stamp) && !(is_latest && latest_changed) {
            continue;
        }
        let latest_path = config.latest_state_file.as_deref().filter(|_| is_latest);
        let written = write_state(&config.state_dir, sid, *pct, read_at, latest_path);
        followed.troubled(sid, "cannot write the state file", written.as_ref().err());
        if written.is_ok() {
            followed.written = Some(stamp);
        }
    }
}
