//! How full each Claude Code session's context window is: a transcript reading, the status-line
//! feed and the window rules combined into one set of figures, plus warning thresholds, state
//! files, and the task inside `serve` that runs them.

pub mod follow;
pub mod monitor;
pub mod statefile;
pub mod statusline;
pub mod task;
pub(crate) mod thresholds;
pub mod window;

use std::path::PathBuf;

use serde::Serialize;

use crate::claude::transcript::ContextReading;
pub use crate::claude::transcript::UsageSource;
use statusline::Feed;
use window::{WindowResolver, WindowSource, percent};

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
    let window = resolver.resolve(feed_window, model.as_deref());
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

    #[test]
    fn transcript_reading_with_table_window() {
        let reading = ContextReading {
            used_tokens: 150_000,
            model: Some("claude-sonnet-4-5".into()),
            source: UsageSource::Assistant,
        };
        let f = figures(Some(&reading), None, &WindowResolver::default());
        assert_eq!(f.percent, Some(75.0));
        assert_eq!(f.window_source, WindowSource::ModelTable);
        assert_eq!(f.usage_source, Some(UsageSource::Assistant));
    }

    #[test]
    fn fresh_feed_wins_for_usage_and_window() {
        let reading = ContextReading {
            used_tokens: 1,
            model: Some("claude-sonnet-4-5".into()),
            source: UsageSource::Assistant,
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
