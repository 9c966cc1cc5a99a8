//! How full each Claude Code session's context window is: a transcript reading, the status-line
//! feed and the window rules combined into one set of figures, plus warning thresholds and state
//! files. The session loop follows each session ([`followed::Followed`]); `[context]` is
//! validated here ([`ContextConfig`]).

pub mod follow;
pub mod followed;
pub mod statefile;
pub mod statusline;
pub(crate) mod thresholds;
pub mod window;

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::config::ContextSettings;
use crate::mux::{KeystrokeText, TextError};
use crate::reading::transcript::ContextReading;
pub use crate::reading::transcript::UsageSource;
use statusline::Feed;
use thresholds::{ThresholdError, Thresholds};
use window::{WindowError, WindowResolver, WindowSize, WindowSource, percent};

pub const MIN_POLL_INTERVAL: Duration = Duration::from_millis(50);
/// Percentage used to check that a message template renders to typable text.
const SAMPLE_PERCENT: f64 = 80.0;

#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    #[error("context.poll_interval is {0:?}; give at least 50ms (e.g. \"10s\")")]
    PollInterval(Duration),
    #[error("context.default_window / context.models: {0}")]
    Window(#[from] WindowError),
    #[error(transparent)]
    Threshold(#[from] ThresholdError),
    #[error("context.thresholds.{level}.message cannot be typed: {source}")]
    Message { level: String, source: TextError },
}

/// `[context]`, validated: what the session loop follows each session's context with.
#[derive(Debug, Clone)]
pub struct ContextConfig {
    /// Off: no transcript is followed and nothing is warned (`[context] enabled = false`).
    pub enabled: bool,
    pub poll_interval: Duration,
    pub feed_max_age: Duration,
    /// Holds `context/<sid>` state files and `feed/<sid>.json` status-line feeds.
    pub state_dir: PathBuf,
    pub latest_state_file: Option<PathBuf>,
    pub resolver: WindowResolver,
    pub thresholds: Thresholds,
    /// Whether warnings are told (the setting on, and the mux backend in use).
    pub warnings: bool,
    /// The agents' config dirs searched for a transcript its hooks did not name.
    pub homes: Vec<PathBuf>,
}

impl ContextConfig {
    /// Validates `[context]`; without `can_type` (the spool backend) nothing is warned.
    pub fn from_settings(
        s: &ContextSettings,
        state_dir: PathBuf,
        homes: Vec<PathBuf>,
        can_type: bool,
    ) -> Result<Self, ContextError> {
        if s.poll_interval < MIN_POLL_INTERVAL {
            return Err(ContextError::PollInterval(s.poll_interval));
        }
        let resolver = WindowResolver::new(
            s.models.iter().map(|(k, v)| (k.as_str(), *v)),
            s.default_window,
        )?;
        let thresholds = Thresholds::from_settings(&s.thresholds)?;
        for level in thresholds.levels() {
            KeystrokeText::new(&level.render(SAMPLE_PERCENT)).map_err(|source| {
                ContextError::Message {
                    level: level.name.replace('-', "_"),
                    source,
                }
            })?;
        }
        let latest = s.latest_state_file.trim();
        Ok(Self {
            enabled: s.enabled,
            poll_interval: s.poll_interval,
            feed_max_age: s.feed_max_age,
            state_dir,
            latest_state_file: (!latest.is_empty()).then(|| PathBuf::from(latest)),
            resolver,
            thresholds,
            warnings: s.enabled && s.warnings && can_type,
            homes,
        })
    }
}

/// Also the figures of `wakebridge context --json`, in this order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContextFigures {
    pub model: Option<String>,
    /// `None` until the session has had a response (or a compaction).
    pub used_tokens: Option<u64>,
    pub context_window: u64,
    /// 0-100, one decimal.
    pub percent: Option<f64>,
    /// Which rule decided the window (`source` in JSON).
    #[serde(rename = "source")]
    pub window_source: WindowSource,
    pub usage_source: Option<UsageSource>,
}

/// Combines a transcript reading and a fresh feed: a feed with usage wins (it is Claude Code's
/// own figure), and so does its window.
pub fn figures(
    reading: Option<&ContextReading>,
    fresh_feed: Option<&Feed>,
    resolver: &WindowResolver,
) -> ContextFigures {
    let model = reading
        .and_then(|r| r.model.clone())
        .or_else(|| fresh_feed.and_then(|f| f.model_id.clone()));
    let feed_window = fresh_feed.and_then(|f| f.context_window_size);
    // The transcript's own window (Codex states it) when no feed gives one.
    let stated = reading
        .and_then(|r| r.window)
        .filter(|_| feed_window.is_none());
    let window = match stated {
        Some(tokens) => WindowSize {
            tokens,
            source: WindowSource::Transcript,
        },
        None => resolver.resolve(feed_window, model.as_deref()),
    };
    let from_feed = fresh_feed
        .and_then(Feed::used_tokens)
        .map(|used| (used, UsageSource::Statusline));
    let used = from_feed.or(reading.map(|r| (r.used_tokens, r.source)));
    ContextFigures {
        model,
        used_tokens: used.map(|(u, _)| u),
        context_window: window.tokens,
        window_source: window.source,
        percent: used.map(|(u, _)| percent(u, window.tokens)),
        usage_source: used.map(|(_, s)| s),
    }
}

/// The JSON shape of `wakebridge context --json`.
#[derive(Debug, Clone, Serialize)]
pub struct ContextReport {
    pub session_id: Option<String>,
    pub transcript: Option<PathBuf>,
    #[serde(flatten)]
    pub figures: ContextFigures,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> ContextSettings {
        crate::config::defaults().context.clone()
    }

    #[test]
    fn defaults_validate_and_warn_only_with_mux() -> Result<(), ContextError> {
        let s = settings();
        let c = ContextConfig::from_settings(&s, PathBuf::from("/s"), vec![], true)?;
        assert!(c.warnings && c.enabled);
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
        let spool = ContextConfig::from_settings(&s, PathBuf::from("/s"), vec![], false)?;
        assert!(!spool.warnings);
        Ok(())
    }

    #[test]
    fn rejects_templates_that_cannot_be_typed() {
        let mut s = settings();
        s.thresholds.checkpoint.message = "{pct}% used".into();
        let err = ContextConfig::from_settings(&s, PathBuf::from("/s"), vec![], true);
        assert!(
            matches!(&err, Err(ContextError::Message { level, .. }) if level == "checkpoint"),
            "{err:?}"
        );
        let mut s = settings();
        s.thresholds.wrap_up.percent = 90.0;
        assert!(matches!(
            ContextConfig::from_settings(&s, PathBuf::from("/s"), vec![], true),
            Err(ContextError::Threshold(_))
        ));
        let mut s = settings();
        s.poll_interval = Duration::from_millis(1);
        assert!(matches!(
            ContextConfig::from_settings(&s, PathBuf::from("/s"), vec![], true),
            Err(ContextError::PollInterval(_))
        ));
    }

    #[test]
    fn transcript_reading_with_table_window() {
        let reading = ContextReading {
            used_tokens: 150_000,
            model: Some("claude-sonnet-4-5".into()),
            source: UsageSource::Assistant,
            window: None,
        };
        let f = figures(Some(&reading), None, &WindowResolver::default());
        assert_eq!(f.percent, Some(75.0));
        assert_eq!(f.window_source, WindowSource::ModelTable);
        assert_eq!(f.usage_source, Some(UsageSource::Assistant));
    }

    #[test]
    fn a_window_the_transcript_states_wins_over_the_model_s() {
        let reading = ContextReading {
            used_tokens: 193_800,
            model: Some("gpt-9-codex".into()),
            source: UsageSource::Assistant,
            window: Some(258_400),
        };
        let f = figures(Some(&reading), None, &WindowResolver::default());
        assert_eq!(f.context_window, 258_400);
        assert_eq!(f.window_source, WindowSource::Transcript);
        assert_eq!(f.percent, Some(75.0));
    }

    #[test]
    fn fresh_feed_wins_for_usage_and_window() {
        let reading = ContextReading {
            used_tokens: 1,
            model: Some("claude-sonnet-4-5".into()),
            source: UsageSource::Assistant,
            window: None,
        };
        let feed = Feed {
            session_id: "s".into(),
            model_id: None,
            used_percentage: Some(42.0),
            current_usage: Some(statusline::FeedUsage {
                input_tokens: 420_000,
                ..Default::default()
            }),
            context_window_size: Some(1_000_000),
            exceeds_200k_tokens: None,
            transcript_path: None,
            timestamp: 0,
            limit: None,
            budget: None,
        };
        let f = figures(Some(&reading), Some(&feed), &WindowResolver::default());
        assert_eq!(
            (f.used_tokens, f.context_window, f.percent),
            (Some(420_000), 1_000_000, Some(42.0))
        );
        assert_eq!(f.window_source, WindowSource::Statusline);
        assert_eq!(f.usage_source, Some(UsageSource::Statusline));
    }

    #[test]
    fn nothing_known_gives_no_percent() {
        let f = figures(None, None, &WindowResolver::default());
        assert_eq!(
            (f.used_tokens, f.percent, f.window_source),
            (None, None, WindowSource::Default)
        );
    }
}
