//! Which of wakebridge's texts started a turn (the session loop charges it what the turn cost,
//! `claude::turn`): a prompt is told apart by its words, against the
//! texts the configuration makes wakebridge send (the wake prompt and named wake messages, the
//! nudges, the budget nudge, the context warnings, the resume, the re-hydration), a repeat's
//! `(#2)` aside. A person typing one of them word for word is counted as wakebridge; nothing
//! else is. Pure.

use crate::api::TextKind;
use crate::config::Settings;
use crate::mux::WAKE_PROMPT;

/// How every budget nudge begins (`policy::nudge_text`).
pub const BUDGET_PREFIX: &str = "Usage budget: ";

/// The texts of one configuration, by kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Texts {
    exact: Vec<(String, TextKind)>,
    /// Warnings: the words around `{pct}`.
    templates: Vec<(String, String)>,
}

impl Texts {
    pub fn new(settings: &Settings) -> Self {
        // First match wins: a nudge may also be a named wake message (the shipped
        // `continue` is), and the nudger sends it far more often than a person asks for it.
        let nudges = settings.nudger.messages.iter();
        let mut exact: Vec<_> = nudges.map(|m| (m.clone(), TextKind::Nudge)).collect();
        exact.push((WAKE_PROMPT.to_owned(), TextKind::Wake));
        let named = settings.wake.messages.values();
        exact.extend(named.map(|m| (m.clone(), TextKind::Wake)));
        exact.push((settings.limits.resume_message.clone(), TextKind::Resume));
        exact.push((settings.rewind.message.clone(), TextKind::Rewind));
        let levels = &settings.context.thresholds;
        let templates = [&levels.wrap_up.message, &levels.checkpoint.message]
            .into_iter()
            .map(|m| match m.split_once("{pct}") {
                Some((before, after)) => (before.to_owned(), after.to_owned()),
                None => (m.clone(), String::new()),
            })
            .collect();
        Self { exact, templates }
    }

    /// The kind of `prompt` if it is one of wakebridge's texts.
    pub fn kind(&self, prompt: &str) -> Option<TextKind> {
        let text = unnumbered(prompt.trim());
        if text.starts_with(BUDGET_PREFIX) {
            return Some(TextKind::Budget);
        }
        if let Some((_, kind)) = self.exact.iter().find(|(t, _)| t == text) {
            return Some(*kind);
        }
        self.templates
            .iter()
            .any(|(before, after)| {
                text.len() > before.len() + after.len()
                    && text.starts_with(before.as_str())
                    && text.ends_with(after.as_str())
            })
            .then_some(TextKind::Warning)
    }
}

impl Default for Texts {
    /// The shipped configuration's.
    fn default() -> Self {
        Self::new(crate::config::defaults())
    }
}

/// `text` without the ` (#N)` a repeat within Claude Code's duplicate window gets.
fn unnumbered(text: &str) -> &str {
    text.strip_suffix(')')
        .and_then(|t| t.rsplit_once(" (#"))
        .filter(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .map_or(text, |(t, _)| t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_of_the_shipped_texts_is_its_kind_and_a_persons_prompt_is_none() {
        let settings = crate::config::defaults();
        let texts = Texts::new(settings);
        let warning = settings
            .context
            .thresholds
            .checkpoint
            .message
            .replace("{pct}", "86.2");
        let cases = [
            (WAKE_PROMPT.to_owned(), Some(TextKind::Wake)),
            (format!("{WAKE_PROMPT} (#2)"), Some(TextKind::Wake)),
            (settings.nudger.messages[0].clone(), Some(TextKind::Nudge)),
            (settings.nudger.messages[1].clone(), Some(TextKind::Nudge)),
            (
                settings.wake.messages["status"].clone(),
                Some(TextKind::Wake),
            ),
            (
                format!("{BUDGET_PREFIX}62% of the 5-hour window…"),
                Some(TextKind::Budget),
            ),
            (warning, Some(TextKind::Warning)),
            (
                settings.limits.resume_message.clone(),
                Some(TextKind::Resume),
            ),
            (settings.rewind.message.clone(), Some(TextKind::Rewind)),
            ("fix the failing test".to_owned(), None),
            (format!("{} please", settings.nudger.messages[0]), None),
            ("Context is % full".to_owned(), None),
        ];
        for (prompt, kind) in cases {
            assert_eq!(texts.kind(&prompt), kind, "{prompt:?}");
        }
        assert_eq!(unnumbered("a (#x)"), "a (#x)");
        assert_eq!(unnumbered("a (#)"), "a (#)");
        assert_eq!(unnumbered("a (#12)"), "a");
    }
}
