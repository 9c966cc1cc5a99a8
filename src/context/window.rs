//! How many tokens a session's context window holds, and which rule decided: a fresh
//! status-line feed (Claude Code's own figure), a `[1m]` model-id suffix, the
//! `[context.models]` table, or the default; and used tokens as a percentage. Reads no files.

use std::collections::BTreeMap;

/// The window of the 1M-token variant of a model, and its model-id suffix (`claude-opus-4-6[1m]`).
pub const ONE_MILLION_WINDOW: u64 = 1_000_000;
pub const ONE_MILLION_SUFFIX: &str = "[1m]";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WindowError {
    #[error("context window for {what} is 0 tokens; give a positive token count")]
    ZeroWindow { what: String },
}

/// Which rule decided the window size (its kebab-case name in JSON and logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum WindowSource {
    Statusline,
    /// The transcript states it (Codex's `model_context_window`).
    Transcript,
    ModelSuffix,
    ModelTable,
    Default,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSize {
    pub tokens: u64,
    pub source: WindowSource,
}

/// Decides window sizes from the model table and a default.
#[derive(Debug, Clone)]
pub struct WindowResolver {
    /// Lower-cased prefix -> tokens; overrides already merged over the defaults.
    table: BTreeMap<String, u64>,
    default_window: u64,
}

impl Default for WindowResolver {
    /// The `[context]` model table and default window of `config/default.toml`.
    fn default() -> Self {
        let settings = &crate::config::defaults().context;
        Self {
            table: settings.models.clone(),
            default_window: settings.default_window,
        }
    }
}

impl WindowResolver {
    /// The model table `models` (prefix -> tokens) and the window for models nothing matches.
    pub fn new<'a>(
        models: impl IntoIterator<Item = (&'a str, u64)>,
        default_window: u64,
    ) -> Result<Self, WindowError> {
        if default_window == 0 {
            return Err(WindowError::ZeroWindow {
                what: "the default".into(),
            });
        }
        let mut resolver = Self {
            default_window,
            table: BTreeMap::new(),
        };
        for (prefix, tokens) in models {
            if tokens == 0 {
                return Err(WindowError::ZeroWindow {
                    what: format!("model prefix {prefix:?}"),
                });
            }
            resolver.table.insert(prefix.to_ascii_lowercase(), tokens);
        }
        Ok(resolver)
    }

    /// Window for a session: `statusline_window` is the feed's `context_window_size` when the
    /// feed is fresh (stale feeds must not be passed), `model` the transcript's model id.
    pub fn resolve(&self, statusline_window: Option<u64>, model: Option<&str>) -> WindowSize {
        let lower = model.map(|model| model.trim().to_ascii_lowercase());
        let (tokens, source) = if let Some(tokens) = statusline_window.filter(|&t| t > 0) {
            (tokens, WindowSource::Statusline)
        } else if lower
            .as_ref()
            .is_some_and(|m| m.ends_with(ONE_MILLION_SUFFIX))
        {
            (ONE_MILLION_WINDOW, WindowSource::ModelSuffix)
        } else if let Some(tokens) = lower.and_then(|m| self.lookup(&m)) {
            (tokens, WindowSource::ModelTable)
        } else {
            (self.default_window, WindowSource::Default)
        };
        WindowSize { tokens, source }
    }

    /// Longest table prefix of the model id. Provider-qualified ids (`us.anthropic.claude-…`)
    /// are matched from their `claude-` part.
    fn lookup(&self, lower_model: &str) -> Option<u64> {
        let bare = lower_model
            .find("claude-")
            .and_then(|i| lower_model.get(i..))
            .unwrap_or(lower_model);
        self.table
            .iter()
            .filter(|(prefix, _)| {
                bare.starts_with(prefix.as_str()) || lower_model.starts_with(prefix.as_str())
            })
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, tokens)| *tokens)
    }
}

/// `used / window` as a percentage in 0.0..=100.0 rounded to one decimal (0.0 for no window).
pub fn percent(used_tokens: u64, window_tokens: u64) -> f64 {
    if window_tokens == 0 {
        return 0.0;
    }
    let raw = used_tokens as f64 * 100.0 / window_tokens as f64;
    ((raw * 10.0).round() / 10.0).clamp(0.0, 100.0)
}

/// A percentage as the whole number files and lines show (`None` for NaN or infinity).
pub fn whole_percent(percent: f64) -> Option<u32> {
    percent
        .is_finite()
        .then(|| percent.round().clamp(0.0, 100.0) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statusline_wins_over_everything() {
        let r = WindowResolver::default();
        let w = r.resolve(Some(1_000_000), Some("claude-haiku-4-5"));
        assert_eq!(
            w,
            WindowSize {
                tokens: 1_000_000,
                source: WindowSource::Statusline
            }
        );
    }

    #[test]
    fn one_million_suffix_beats_table() {
        let r = WindowResolver::default();
        let w = r.resolve(None, Some("claude-sonnet-4-5-20250929[1m]"));
        assert_eq!(
            w,
            WindowSize {
                tokens: 1_000_000,
                source: WindowSource::ModelSuffix
            }
        );
    }

    #[test]
    fn table_uses_longest_prefix_and_overrides() {
        let r = WindowResolver::default();
        assert_eq!(
            r.resolve(None, Some("claude-opus-4-6-20260101")).tokens,
            1_000_000
        );
        assert_eq!(
            r.resolve(None, Some("claude-opus-4-1-20250805")).tokens,
            200_000
        );
        assert_eq!(
            r.resolve(None, Some("us.anthropic.claude-sonnet-4-6-v1:0"))
                .source,
            WindowSource::ModelTable
        );
        let o = WindowResolver::new(
            [("claude-opus-4-1", 500_000), ("my-model", 64_000)],
            100_000,
        )
        .expect("valid overrides");
        assert_eq!(o.resolve(None, Some("claude-opus-4-1-x")).tokens, 500_000);
        assert_eq!(o.resolve(None, Some("My-Model-2")).tokens, 64_000);
        assert_eq!(
            o.resolve(None, Some("gpt-9")),
            WindowSize {
                tokens: 100_000,
                source: WindowSource::Default
            }
        );
    }

    #[test]
    fn rejects_zero_windows() {
        assert!(WindowResolver::new([], 0).is_err());
        assert!(WindowResolver::new([("x", 0)], 1).is_err());
    }

    #[test]
    fn percent_has_one_decimal_and_is_clamped() {
        assert_eq!(percent(14_310, 200_000), 7.2);
        assert_eq!(percent(150_000, 200_000), 75.0);
        assert_eq!(percent(999_999, 200_000), 100.0);
        assert_eq!(percent(5, 0), 0.0);
    }
}
