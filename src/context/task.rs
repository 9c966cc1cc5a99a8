//! The context monitor inside `serve`. Every poll (sooner on a change notification) it finds
//! sessions, follows each one's transcript, prefers a fresh status-line feed, writes the state
//! files, publishes a `ContextView`, records usage limits, and offers due warnings to the wake
//! gate; one not typed stays due. With `[rewind] auto`, a typed checkpoint asks for a rewind.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::api;
use crate::api::Action;
use crate::claude::home::ClaudeHome;
use crate::clock;
use crate::config::ContextSettings;
use crate::context::follow::{ChangeWatcher, PollEvent, TranscriptFollower, find_transcript_in};
use crate::context::monitor::{Candidate, ContextView, StateStamp, select_sessions};
use crate::context::statefile::write_state;
use crate::context::statusline::{Feed, feed_dir, read_feed};
use crate::context::thresholds::{Level, SessionThresholds, ThresholdError, Thresholds};
use crate::context::window::{WindowError, WindowResolver};
use crate::context::{ContextFigures, figures};
use crate::delivery::Deliverer;
use crate::mux::{KeystrokeText, TextError};
use crate::session::gate::Mode;
use crate::store::{DeliverySource, LimitSeen, LimitSource, Record, RewindWhy};
use crate::telemetry::notice::{Notice, NoticeKind};
use crate::telemetry::warn::Warnings;
use crate::wakedir::reader::mapped_panes;
use crate::wire::session_id::short;

/// Most sessions followed at once: far above what one machine runs.
pub const MAX_FOLLOWED_SESSIONS: usize = 256;
/// Ledger sessions the hook has not reported for this long are no longer followed (mapped ones
/// always are): a day covers a session left idle overnight.
pub const LEDGER_RECENCY: Duration = Duration::from_secs(24 * 60 * 60);
/// Shortest gap between two polls triggered by change notification (a streaming response
/// writes many lines a second).
pub const NOTIFY_MIN_GAP: Duration = Duration::from_secs(1);
pub const MIN_POLL_INTERVAL: Duration = Duration::from_millis(50);
/// Percentage used to check that a message template renders to typable text.
const SAMPLE_PERCENT: f64 = 80.0;

#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    #[error("context.poll_interval is {0:?}; give at least 50ms (e.g. \"10s\")")]
    PollInterval(Duration),
    #[error("context.default_window / context.models: {0}")]
    Window(#[from] WindowError),
    #[error(transparent)]
    Threshold(#[from] ThresholdError),
    #[error("context.thresholds.{level}.message cannot be typed: {source}")]
    Message { level: String, source: TextError },
}

#[derive(Debug, Clone)]
pub struct MonitorConfig {
    pub poll_interval: Duration,
    pub feed_max_age: Duration,
    /// Holds `context/<sid>` state files and `feed/<sid>.json` status-line feeds.
    pub state_dir: PathBuf,
    pub latest_state_file: Option<PathBuf>,
    pub resolver: WindowResolver,
    pub thresholds: Thresholds,
    /// Whether warnings are typed (setting on and the mux backend in use).
    pub warnings: bool,
    /// Claude Code config dirs searched for transcripts.
    pub homes: Vec<ClaudeHome>,
    /// `[rewind] auto`: a checkpoint warning typed also asks for an automatic rewind.
    pub auto_rewind: bool,
}

impl MonitorConfig {
    /// Validates `[context]`; without `can_type` (the spool backend) no warning is typed.
    pub fn from_settings(
        s: &ContextSettings,
        state_dir: PathBuf,
        homes: Vec<ClaudeHome>,
        can_type: bool,
    ) -> Result<Self, MonitorError> {
        if s.poll_interval < MIN_POLL_INTERVAL {
            return Err(MonitorError::PollInterval(s.poll_interval));
        }
        let resolver = WindowResolver::new(
            s.models.iter().map(|(k, v)| (k.as_str(), *v)),
            s.default_window,
        )?;
        let thresholds = Thresholds::from_settings(&s.thresholds)?;
        for level in thresholds.levels() {
            KeystrokeText::new(&level.render(SAMPLE_PERCENT)).map_err(|source| {
                MonitorError::Message {
                    level: level.name.replace('-', "_"),
                    source,
                }
            })?;
        }
        let latest = s.latest_state_file.trim();
        Ok(Self {
            poll_interval: s.poll_interval,
            feed_max_age: s.feed_max_age,
            state_dir,
            latest_state_file: (!latest.is_empty()).then(|| PathBuf::from(latest)),
            resolver,
            thresholds,
            warnings: s.warnings && can_type,
            homes,
            auto_rewind: false,
        })
    }
}

/// A warning due now: the session, its level and the text to type.
type DueWarning = (String, Level, String);

/// Everything kept about one followed session.
#[derive(Default)]
struct Tracked {
    /// The transcript path the hook reported.
    hint: Option<PathBuf>,
    follower: Option<TranscriptFollower>,
    last_event: Option<PollEvent>,
    thresholds: SessionThresholds,
    figures: Option<ContextFigures>,
    /// Newest of the transcript's mtime and the feed's timestamp.
    active_at: Option<SystemTime>,
    written: Option<StateStamp>,
    /// The (level, action) last written to the ledger, so a warning deferred poll after poll
    /// leaves one row per kind of deferral, not one per poll.
    last_recorded: Option<(String, Action)>,
    last_warning: Option<(String, SystemTime)>,
    /// The usage limit last recorded from this session's transcript (its offset) and feed (its
    /// reset), so each is recorded once.
    limit_recorded: (Option<u64>, Option<i64>),
}

impl Tracked {
    /// The `context` of `/sessions` and `wakebridge status`.
    fn status(&self) -> Option<api::Context> {
        let f = self.figures.as_ref()?;
        let at = clock::shown;
        Some(api::Context {
            percent: f.percent,
            used_tokens: f.used_tokens,
            context_window: f.context_window,
            model: f.model.clone(),
            source: <&str>::from(f.window_source).to_owned(),
            usage_source: f.usage_source.map(|u| <&str>::from(u).to_owned()),
            transcript: (self.follower.as_ref()).map(|f| f.path().display().to_string()),
            updated_at: self.active_at.and_then(at),
            pending_warning: self.thresholds.due().map(|l| l.name),
            last_warning: self.last_warning.as_ref().map(|(level, _)| level.clone()),
            last_warning_at: self.last_warning.as_ref().and_then(|(_, t)| at(*t)),
        })
    }
}

struct Monitor {
    config: MonitorConfig,
    sessions: HashMap<String, Tracked>,
    watched: HashSet<PathBuf>,
    latest: Option<String>,
    warned: Warnings,
}

fn plausible_transcript(path: &Path) -> bool {
    path.is_absolute()
        && path.extension().is_some_and(|e| e == "jsonl")
        && !super::follow::is_under_subagents(path)
}

impl Monitor {
    fn new(config: MonitorConfig) -> Self {
        Self {
            config,
            sessions: HashMap::new(),
            watched: HashSet::new(),
            latest: None,
            warned: Warnings::default(),
        }
    }

    fn discover(&mut self, deliverer: &Deliverer, view: &ContextView) {
        let mapped = mapped_panes(deliverer.spool().wake_dir()).into_keys();
        let rows = deliverer.store().sessions();
        let ledger_ok = rows.is_ok();
        if let Some(e) = self.warned.first_err("ledger", &rows) {
            tracing::warn!(error = %e, "context monitor cannot read sessions from the ledger; following mapped sessions only");
        }
        let ledger = rows.unwrap_or_default().into_iter().map(|row| Candidate {
            transcript_hint: (row.transcript_path)
                .filter(|p| !p.trim().is_empty())
                .map(PathBuf::from),
            last_seen_ms: row.last_seen_ms,
            session_id: row.session_id,
        });
        let since = clock::now_ms().saturating_sub(LEDGER_RECENCY.as_millis() as i64);
        let selected = select_sessions(ledger, mapped, since, MAX_FOLLOWED_SESSIONS);
        if ledger_ok {
            let keep: HashSet<&str> = selected.iter().map(|c| c.session_id.as_str()).collect();
            self.sessions.retain(|sid, _| keep.contains(sid.as_str()));
            view.retain(|sid| keep.contains(sid));
        }
        for c in selected {
            let tracked = self
                .sessions
                .entry(c.session_id)
                .or_insert_with(|| Tracked {
                    thresholds: SessionThresholds::new(self.config.thresholds.clone()),
                    ..Tracked::default()
                });
            if c.transcript_hint.is_some() && tracked.hint != c.transcript_hint {
                tracked.hint = c.transcript_hint;
                // A new path from the hook (resume into another file): look again.
                tracked.follower = None;
            }
        }
    }

    /// Finds the session's transcript; keeps the follower when the path is unchanged.
    fn locate(config: &MonitorConfig, sid: &str, t: &mut Tracked, feed_hint: Option<PathBuf>) {
        let hint = t.hint.clone().or(feed_hint);
        let path = find_transcript_in(&config.homes, sid, hint.as_deref())
            .or_else(|| hint.filter(|p| plausible_transcript(p)));
        let Some(path) = path else { return };
        if t.follower.as_ref().map(TranscriptFollower::path) != Some(path.as_path()) {
            tracing::debug!(session_id = sid, transcript = %path.display(), "following transcript");
            t.follower = Some(TranscriptFollower::new(path));
            t.last_event = None;
        }
    }

    /// One pass over every session: read what is new, update figures, thresholds, state files
    /// and the view. Returns the warnings due now. Blocking I/O: run off the async threads.
    fn scan(&mut self, deliverer: &Deliverer, view: &ContextView, full: bool) -> Vec<DueWarning> {
        if full {
            self.discover(deliverer, view);
        }
        let now_unix = clock::now_s();
        let config = &self.config;
        for (sid, t) in &mut self.sessions {
            let feed = read_feed(&config.state_dir, sid, config.feed_max_age);
            if full && (t.follower.is_none() || t.last_event == Some(PollEvent::Missing)) {
                let feed_hint = feed.as_ref().and_then(|f| f.transcript_path.clone());
                Self::locate(config, sid, t, feed_hint);
            }
            if let Some(follower) = t.follower.as_mut() {
                let polled = follower.poll();
                if let Some(e) = self.warned.first_err(&format!("{sid}:follow"), &polled) {
                    tracing::warn!(session_id = sid.as_str(), error = %e, "context monitor cannot follow the transcript");
                }
                if let Ok(outcome) = polled {
                    t.last_event = Some(outcome.event);
                    if !matches!(outcome.event, PollEvent::Unchanged | PollEvent::Missing)
                        && let Ok(modified) =
                            std::fs::metadata(follower.path()).and_then(|m| m.modified())
                    {
                        t.active_at = t.active_at.max(Some(modified));
                    }
                }
            }
            if let Some(f) = &feed {
                t.active_at = t.active_at.max(Some(clock::from_s(f.timestamp)));
            }
            let seen =
                (deliverer.gate().limits_enabled()).then(|| limits_seen(sid, t, feed.as_ref()));
            for record in seen.unwrap_or_default() {
                if let Err(e) = deliverer.store().record_queued(record) {
                    tracing::warn!(error = %e, "could not record a usage limit in the ledger");
                }
            }
            let reading = t.follower.as_ref().and_then(|f| f.current());
            let figures = figures(reading, feed.as_ref(), &config.resolver);
            if let Some(pct) = figures.percent {
                t.thresholds.observe(pct);
            }
            t.figures = Some(figures);
        }
        self.write_state_files(now_unix);
        for (sid, t) in &self.sessions {
            if let Some(status) = t.status() {
                view.set(sid, status);
            }
        }
        if !self.config.warnings {
            return Vec::new();
        }
        self.sessions
            .iter()
            .filter_map(|(sid, t)| {
                let (level, text) = t.thresholds.due_message()?;
                Some((sid.clone(), level, text))
            })
            .collect()
    }

    /// Writes state files whose whole percent or minute changed, and the "latest" file for the
    /// most recently active session.
    fn write_state_files(&mut self, now_unix: u64) {
        let latest = self
            .sessions
            .iter()
            .filter(|(_, t)| t.figures.as_ref().is_some_and(|f| f.percent.is_some()))
            .max_by_key(|(sid, t)| (t.active_at, std::cmp::Reverse((*sid).clone())))
            .map(|(sid, _)| sid.clone());
        let latest_changed = latest != self.latest;
        self.latest = latest.clone();
        for (sid, t) in &mut self.sessions {
            let Some(pct) = t.figures.as_ref().and_then(|f| f.percent) else {
                continue;
            };
            let stamp = StateStamp::of(pct, now_unix);
            let is_latest = latest.as_deref() == Some(sid.as_str());
            let newly_latest = is_latest && latest_changed;
            if t.written == Some(stamp) && !newly_latest {
                continue;
            }
            let latest_path = self
                .config
                .latest_state_file
                .as_deref()
                .filter(|_| is_latest);
            let written = write_state(&self.config.state_dir, sid, pct, now_unix, latest_path);
            if let Some(e) = self.warned.first_err(&format!("{sid}:state"), &written) {
                tracing::warn!(session_id = sid.as_str(), error = %e, "context monitor cannot write the state file");
            }
            if written.is_ok() {
                t.written = Some(stamp);
            }
        }
    }

    async fn deliver(&mut self, deliverer: &Deliverer, view: &ContextView, due: DueWarning) {
        let (sid, level, text) = (due.0.as_str(), due.1, due.2);
        let text = match KeystrokeText::new(&text) {
            Ok(text) => text,
            Err(e) => {
                if self.warned.first(&format!("{sid}:text")) {
                    tracing::warn!(session_id = sid, level = level.name.as_str(), error = %e, "context warning cannot be typed; fix its template");
                }
                return;
            }
        };
        let outcome = deliverer.gate().wake(sid, &text, Mode::Gated).await;
        let Some(t) = self.sessions.get_mut(sid) else {
            return;
        };
        // Typed or taken by the inbox settles the level; anything else keeps it due, for the
        // next poll (no pane mapped: quietly, a mapping may appear).
        let delivered = outcome.action.woke();
        let key = (level.name.clone(), outcome.action);
        if delivered || t.last_recorded.as_ref() != Some(&key) {
            deliverer
                .record(DeliverySource::Context, sid, &outcome)
                .await;
            t.last_recorded = Some(key);
        }
        if delivered {
            t.thresholds.delivered(&level);
            let top = self.config.thresholds.levels().last() == Some(&level);
            if top {
                deliverer.gate().notices().send(Notice::new(
                    sid,
                    NoticeKind::Checkpoint,
                    format!("past {}%", level.percent),
                ));
            }
            let waiting = || {
                let rewinds = deliverer.store().rewinds();
                rewinds.is_ok_and(|r| r.facts(sid).pending.is_some())
            };
            if self.config.auto_rewind && top && !waiting() {
                let asked = Record::RewindAsked {
                    session_id: sid.to_owned(),
                    why: RewindWhy::Auto,
                    at_ms: clock::now_ms(),
                };
                if let Err(e) = deliverer.store().record(asked).await {
                    tracing::warn!(error = %e, "could not record an automatic rewind in the ledger");
                }
            }
            t.last_warning = Some((level.name.clone(), SystemTime::now()));
            t.last_recorded = None;
            tracing::info!(
                session_id = sid,
                level = level.name.as_str(),
                action = outcome.action.as_str(),
                "Context warning {} typed for {}",
                level.name,
                short(sid)
            );
        } else if outcome.action != Action::SpoolUnmapped {
            tracing::debug!(
                session_id = sid,
                level = level.name.as_str(),
                action = outcome.action.as_str(),
                "context warning deferred; retrying at the next poll"
            );
        }
        if let Some(status) = t.status() {
            view.set(sid, status);
        }
    }

    /// Directories worth watching that are not watched yet: each followed transcript's
    /// directory and the feed directory, when they exist.
    fn unwatched_dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = self
            .sessions
            .values()
            .filter_map(|t| t.follower.as_ref()?.path().parent().map(Path::to_owned))
            .collect();
        dirs.push(feed_dir(&self.config.state_dir));
        dirs.sort();
        dirs.dedup();
        dirs.retain(|d| !self.watched.contains(d) && d.is_dir());
        dirs
    }

    fn relevant(&self, paths: &[PathBuf]) -> bool {
        let feed_dir = feed_dir(&self.config.state_dir);
        paths.iter().any(|p| {
            if p.parent() == Some(feed_dir.as_path()) {
                return true;
            }
            let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
            p.extension().is_some_and(|e| e == "jsonl") && self.sessions.contains_key(stem)
        })
    }
}

/// Runs the context monitor until `shutdown` is cancelled.
pub async fn run(
    deliverer: Arc<Deliverer>,
    view: Arc<ContextView>,
    config: MonitorConfig,
    shutdown: CancellationToken,
) {
    tracing::info!(
        poll_interval_ms = config.poll_interval.as_millis() as u64,
        warnings = config.warnings,
        "context monitor started"
    );
    let poll_interval = config.poll_interval;
    let notify_gap = NOTIFY_MIN_GAP.min(poll_interval);
    let mut watcher = ChangeWatcher::new(poll_interval);
    let mut monitor = Monitor::new(config);
    let mut next_full = Instant::now();
    loop {
        let full = Instant::now() >= next_full;
        if full {
            next_full = Instant::now() + poll_interval;
        }
        let (scan_deliverer, scan_view) = (deliverer.clone(), view.clone());
        let scanned = tokio::task::spawn_blocking(move || {
            let due = monitor.scan(&scan_deliverer, &scan_view, full);
            (monitor, due)
        })
        .await;
        let due = match scanned {
            Ok((m, due)) => {
                monitor = m;
                due
            }
            Err(e) => {
                tracing::error!(error = %e, "context monitor pass failed; the monitor stops");
                return;
            }
        };
        for warning in due {
            if shutdown.is_cancelled() {
                return;
            }
            monitor.deliver(&deliverer, &view, warning).await;
        }
        for dir in monitor.unwatched_dirs() {
            match watcher.watch_dir(&dir) {
                Ok(()) => {
                    monitor.watched.insert(dir);
                }
                Err(e) => tracing::debug!(error = %e, "context monitor polls instead"),
            }
        }
        let notified_ready = Instant::now() + notify_gap;
        loop {
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep_until(next_full) => break,
                paths = watcher.next() => {
                    if monitor.relevant(&paths) {
                        tokio::select! {
                            _ = shutdown.cancelled() => return,
                            _ = tokio::time::sleep_until(notified_ready.min(next_full)) => {}
                        }
                        break;
                    }
                }
            }
        }
    }
}

/// What `t`'s transcript and feed say about a usage limit not recorded yet: a notice (unless its
/// reset is past), a response after it (the limit lifted), a used-up `rate_limits` window.
fn limits_seen(sid: &str, t: &mut Tracked, feed: Option<&Feed>) -> Vec<Record> {
    let now_ms = clock::now_ms();
    let mut seen = Vec::new();
    match t.follower.as_ref().and_then(|f| f.limit()) {
        Some(limit) if t.limit_recorded.0 != Some(limit.offset) => {
            t.limit_recorded.0 = Some(limit.offset);
            let at_ms = limit.found.at_ms.unwrap_or(now_ms);
            let notice = limit.found.notice.clone();
            // The record's exact reset, where it has one, over the minute its text shows.
            let found = LimitSeen::of_notice(sid, notice, LimitSource::Transcript, at_ms, true)
                .with_exact_reset(limit.found.resets_at_ms);
            if found.resets_at_ms.is_none_or(|at| at > now_ms) {
                seen.push(Record::Limited(found));
            }
        }
        None if t.limit_recorded.0.take().is_some() => seen.push(Record::LimitLifted {
            session_id: sid.to_owned(),
        }),
        _ => {}
    }
    if let Some(limit) = feed.and_then(|f| f.limit.as_ref())
        && t.limit_recorded.1 != limit.resets_at_ms
        && limit.resets_at_ms.is_none_or(|at| at > now_ms)
    {
        t.limit_recorded.1 = limit.resets_at_ms;
        // The feed's reset is exact to the second: nothing to read in a time zone.
        let kind = limit.kind.clone();
        let notice = crate::claude::limits::Notice { kind, resets: None };
        let found = LimitSeen::of_notice(sid, notice, LimitSource::Statusline, now_ms, true)
            .with_exact_reset(limit.resets_at_ms);
        seen.push(Record::Limited(found));
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load_settings;

    fn settings() -> ContextSettings {
        match load_settings(None, &crate::env::Env::empty()) {
            Ok(s) => s.context,
            Err(e) => panic!("built-in defaults must load: {e}"),
        }
    }

    #[test]
    fn defaults_validate_and_type_only_with_mux() -> Result<(), MonitorError> {
        let s = settings();
        let c = MonitorConfig::from_settings(&s, PathBuf::from("/s"), vec![], true)?;
        assert!(c.warnings);
        assert_eq!(c.poll_interval, Duration::from_secs(10));
        assert_eq!(c.latest_state_file, None);
        let levels: Vec<(&str, f64)> = c
            .thresholds
            .levels()
            .iter()
            .map(|l| (l.name.as_str(), l.percent))
            .collect();
        assert_eq!(levels, [("wrap-up", 75.0), ("checkpoint", 85.0)]);
        assert_eq!(
            c.resolver.resolve(None, Some("claude-opus-5-5")).tokens,
            1_000_000
        );
        let spool = MonitorConfig::from_settings(&s, PathBuf::from("/s"), vec![], false)?;
        assert!(!spool.warnings);
        Ok(())
    }

    #[test]
    fn rejects_templates_that_cannot_be_typed() {
        let mut s = settings();
        s.thresholds.checkpoint.message = "{pct}% used".into();
        let err = MonitorConfig::from_settings(&s, PathBuf::from("/s"), vec![], true);
        assert!(
            matches!(&err, Err(MonitorError::Message { level, .. }) if level == "checkpoint"),
            "{err:?}"
        );
        let mut s = settings();
        s.thresholds.wrap_up.percent = 90.0;
        assert!(matches!(
            MonitorConfig::from_settings(&s, PathBuf::from("/s"), vec![], true),
            Err(MonitorError::Threshold(_))
        ));
        let mut s = settings();
        s.poll_interval = Duration::from_millis(1);
        assert!(matches!(
            MonitorConfig::from_settings(&s, PathBuf::from("/s"), vec![], true),
            Err(MonitorError::PollInterval(_))
        ));
    }

    #[test]
    fn view_json_has_the_status_fields() {
        let view = ContextView::default();
        let figures = ContextFigures {
            model: Some("claude-sonnet-4-5".into()),
            used_tokens: Some(150_000),
            context_window: 200_000,
            window_source: crate::context::window::WindowSource::ModelTable,
            percent: Some(75.0),
            usage_source: Some(crate::context::UsageSource::Assistant),
        };
        let mut t = Tracked {
            figures: Some(figures),
            active_at: Some(SystemTime::UNIX_EPOCH),
            ..Tracked::default()
        };
        t.thresholds.observe(75.0);
        view.set("s1", t.status().expect("figures known"));
        let c = view.status("s1").expect("followed");
        assert_eq!(c.percent, Some(75.0));
        assert_eq!(c.used_tokens, Some(150_000));
        assert_eq!(c.context_window, 200_000);
        assert_eq!(c.source, "model-table");
        assert_eq!(c.usage_source.as_deref(), Some("assistant"));
        assert_eq!(c.updated_at, Some(jiff::Timestamp::UNIX_EPOCH));
        assert_eq!(c.pending_warning.as_deref(), Some("wrap-up"));
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["updated_at"], "1970-01-01T00:00:00Z");
        view.retain(|sid| sid != "s1");
        assert!(view.status("s1").is_none());
    }
}
