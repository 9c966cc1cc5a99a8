//! Context warning thresholds for one session, a pure state machine: each level fires once when
//! usage crosses it, re-arms only after usage falls below it (a compaction), and stays due until
//! it is `delivered`, so a warning that could not be typed now is not lost.

use crate::config::{ContextLevelSettings, ContextThresholdSettings};

/// Placeholder in templates replaced by the current percentage.
pub const PCT_PLACEHOLDER: &str = "{pct}";

/// Errors in threshold configuration, each naming the `[context.thresholds.<level>]` key to fix.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ThresholdError {
    #[error(
        "{}.percent = {percent} is out of range; give a percentage above 0 and at most 100",
        key(name)
    )]
    OutOfRange { name: String, percent: f64 },
    #[error(
        "{}.percent = {lower_percent} is not below {}.percent = {upper_percent}; each level \
         must come at a higher percentage than the one before it (the messages would \
         otherwise arrive in the wrong order)",
        key(lower),
        key(upper)
    )]
    NotIncreasing {
        lower: String,
        lower_percent: f64,
        upper: String,
        upper_percent: f64,
    },
    #[error("{}.message is empty; give the text to type", key(name))]
    EmptyTemplate { name: String },
}

/// The settings key of a level: `wrap-up` is `context.thresholds.wrap_up`.
fn key(name: &str) -> String {
    format!("context.thresholds.{}", name.replace('-', "_"))
}

#[derive(Debug, Clone, PartialEq)]
pub struct Level {
    /// A stable name for logs and the ledger (`wrap-up`, `checkpoint`).
    pub name: String,
    pub percent: f64,
    pub template: String,
}

impl Level {
    pub fn new(name: &str, percent: f64, template: &str) -> Self {
        Self {
            name: name.to_owned(),
            percent,
            template: template.to_owned(),
        }
    }

    /// The message for a session at `pct` percent, rounded to a whole number.
    pub fn render(&self, pct: f64) -> String {
        let shown = super::window::whole_percent(pct).map_or("?".to_owned(), |p| p.to_string());
        self.template.replace(PCT_PLACEHOLDER, &shown)
    }
}

/// The validated levels, lowest first; shared by every session's [`SessionThresholds`].
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    levels: std::sync::Arc<[Level]>,
}

impl Default for Thresholds {
    /// The `[context.thresholds]` defaults of `config/default.toml`.
    fn default() -> Self {
        Self {
            levels: levels_of(&crate::config::defaults().context.thresholds).into(),
        }
    }
}

/// The two levels `[context.thresholds]` describes, lowest first.
fn levels_of(settings: &ContextThresholdSettings) -> Vec<Level> {
    let level = |name, s: &ContextLevelSettings| Level::new(name, s.percent, &s.message);
    vec![
        level("wrap-up", &settings.wrap_up),
        level("checkpoint", &settings.checkpoint),
    ]
}

impl Thresholds {
    pub fn from_settings(settings: &ContextThresholdSettings) -> Result<Self, ThresholdError> {
        Self::new(levels_of(settings))
    }

    /// Validates levels: each in (0, 100], strictly increasing, non-empty template.
    pub fn new(levels: Vec<Level>) -> Result<Self, ThresholdError> {
        for level in &levels {
            if !(level.percent > 0.0 && level.percent <= 100.0) {
                return Err(ThresholdError::OutOfRange {
                    name: level.name.clone(),
                    percent: level.percent,
                });
            }
            if level.template.trim().is_empty() {
                return Err(ThresholdError::EmptyTemplate {
                    name: level.name.clone(),
                });
            }
        }
        for pair in levels.windows(2) {
            if let [lower, upper] = pair
                && lower.percent >= upper.percent
            {
                return Err(ThresholdError::NotIncreasing {
                    lower: lower.name.clone(),
                    lower_percent: lower.percent,
                    upper: upper.name.clone(),
                    upper_percent: upper.percent,
                });
            }
        }
        Ok(Self {
            levels: levels.into(),
        })
    }

    pub fn levels(&self) -> &[Level] {
        &self.levels
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LevelState {
    /// Ready to fire on the next crossing.
    Armed,
    /// Fired and not yet delivered.
    Pending,
    /// Delivered; re-armed once usage falls below the level.
    Settled,
}

#[derive(Debug, Clone)]
pub struct SessionThresholds {
    config: Thresholds,
    states: Vec<LevelState>,
    last_percent: Option<f64>,
}

impl Default for SessionThresholds {
    fn default() -> Self {
        Self::new(Thresholds::default())
    }
}

impl SessionThresholds {
    pub fn new(config: Thresholds) -> Self {
        Self {
            states: vec![LevelState::Armed; config.levels.len()],
            config,
            last_percent: None,
        }
    }

    /// Takes a new percentage into account. Crossing an armed level makes it pending; falling
    /// below a level re-arms it and withdraws it if still pending (the warning is moot).
    pub fn observe(&mut self, percent: f64) {
        if !percent.is_finite() {
            return;
        }
        self.last_percent = Some(percent);
        for (level, state) in self.config.levels.iter().zip(self.states.iter_mut()) {
            if percent < level.percent {
                *state = LevelState::Armed;
            } else if *state == LevelState::Armed {
                *state = LevelState::Pending;
            }
        }
    }

    /// The highest pending level: the one to deliver now if the gate allows.
    pub fn due(&self) -> Option<Level> {
        self.config
            .levels
            .iter()
            .zip(&self.states)
            .rev()
            .find(|(_, s)| **s == LevelState::Pending)
            .map(|(l, _)| l.clone())
    }

    /// The message for the due level at the latest percentage.
    pub fn due_message(&self) -> Option<(Level, String)> {
        let level = self.due()?;
        let text = level.render(self.last_percent.unwrap_or(level.percent));
        Some((level, text))
    }

    /// Records that `level` was delivered: it and every lower pending level are settled (a
    /// checkpoint warning supersedes the wrap-up one). Unknown levels are ignored.
    pub fn delivered(&mut self, level: &Level) {
        let Some(index) = self.config.levels.iter().position(|l| l.name == level.name) else {
            return;
        };
        for state in self.states.iter_mut().take(index + 1) {
            if *state == LevelState::Pending {
                *state = LevelState::Settled;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> SessionThresholds {
        SessionThresholds::new(Thresholds::default())
    }

    #[test]
    fn fires_once_per_crossing() {
        let mut s = session();
        s.observe(74.9);
        assert_eq!(s.due(), None);
        s.observe(75.0);
        let due = s.due().map(|l| l.name);
        assert_eq!(due.as_deref(), Some("wrap-up"));
        if let Some(l) = s.due() {
            s.delivered(&l);
        }
        s.observe(78.0);
        s.observe(80.0);
        assert_eq!(s.due(), None, "no refire while above the level");
    }

    #[test]
    fn rearms_only_after_falling_below() {
        let mut s = session();
        s.observe(76.0);
        if let Some(l) = s.due() {
            s.delivered(&l);
        }
        s.observe(20.0);
        assert_eq!(s.due(), None);
        s.observe(75.5);
        assert_eq!(s.due().map(|l| l.name).as_deref(), Some("wrap-up"));
    }

    #[test]
    fn undelivered_warning_stays_due() {
        let mut s = session();
        s.observe(80.0);
        s.observe(81.0);
        s.observe(82.0);
        assert_eq!(s.due().map(|l| l.name).as_deref(), Some("wrap-up"));
    }

    #[test]
    fn higher_level_supersedes_lower_one() {
        let mut s = session();
        s.observe(90.0);
        let due = s.due();
        assert_eq!(due.as_ref().map(|l| l.name.as_str()), Some("checkpoint"));
        if let Some(l) = due {
            s.delivered(&l);
        }
        assert_eq!(s.due(), None, "wrap-up settled by the checkpoint warning");
    }

    #[test]
    fn falling_below_withdraws_pending_warning() {
        let mut s = session();
        s.observe(86.0);
        s.observe(10.0);
        assert_eq!(s.due(), None);
    }

    #[test]
    fn renders_pct_placeholder() {
        let mut s = session();
        s.observe(76.4);
        let (_, text) = s
            .due_message()
            .unwrap_or_else(|| (Level::new("x", 1.0, "x"), String::new()));
        assert!(text.starts_with("Context is 76% full:"), "{text}");
        assert_eq!(Level::new("x", 1.0, "{pct}/{pct}").render(f64::NAN), "?/?");
    }

    #[test]
    fn rejects_bad_configuration() {
        let bad = Thresholds::new(vec![Level::new("a", 80.0, "x"), Level::new("b", 70.0, "y")]);
        assert!(matches!(bad, Err(ThresholdError::NotIncreasing { .. })));
        assert!(Thresholds::new(vec![Level::new("a", 0.0, "x")]).is_err());
        assert!(Thresholds::new(vec![Level::new("a", f64::NAN, "x")]).is_err());
        assert!(Thresholds::new(vec![Level::new("a", 50.0, " ")]).is_err());
    }
}
