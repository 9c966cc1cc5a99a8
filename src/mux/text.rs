//! The only text wakebridge ever types into a pane, validated once into a [`KeystrokeText`].
//! Nothing from an event payload can become one without passing these rules.

use crate::wakedir::printable::is_printable_char;

/// The wake prompt, byte for byte the reference bridge's (ASCII hyphen, trailing period).
pub const WAKE_PROMPT: &str = "Check the event bus - a directed event arrived for this session.";

pub const CLEAR_COMMAND: &str = "/clear";

/// Longest text accepted, in characters. A nudge or warning is one sentence or two; long text
/// arriving in one burst is what terminal UIs treat as a paste, where the submit gets lost.
pub const MAX_KEYSTROKE_CHARS: usize = 500;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    #[error("keystroke text is empty; configure a non-empty message")]
    Empty,
    #[error(
        "keystroke text is {chars} characters long; keep it under {MAX_KEYSTROKE_CHARS} so it is \
         not treated as a paste"
    )]
    TooLong { chars: usize },
    #[error(
        "keystroke text contains the non-printable character {found:?} at position {at}; only \
         printable characters and plain spaces can be typed (the Enter is sent separately)"
    )]
    NotPrintable { found: char, at: usize },
    #[error(
        "keystroke text starts with {found:?}; a leading digit answers Claude Code dialogs and a \
         leading '-' or space is misread by the multiplexer, so start with a letter or symbol"
    )]
    BadStart { found: char },
    #[error(
        "keystroke text ends with {found:?}; tmux reads a trailing ';' as a command separator \
         and trailing spaces are invisible, so end with something else"
    )]
    BadEnd { found: char },
}

/// Text safe to type: non-empty, printable, one line; see [`TextError`] for the edges.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeystrokeText {
    text: String,
    /// May be typed over a usage-limit notice (everything else is held back by it).
    resumes: bool,
}

impl KeystrokeText {
    pub fn new(text: &str) -> Result<Self, TextError> {
        let first = text.chars().next().ok_or(TextError::Empty)?;
        let chars = text.chars().count();
        if chars > MAX_KEYSTROKE_CHARS {
            return Err(TextError::TooLong { chars });
        }
        if let Some((at, found)) = text
            .chars()
            .enumerate()
            .find(|(_, c)| !is_printable_char(*c))
        {
            return Err(TextError::NotPrintable { found, at });
        }
        if first.is_ascii_digit() || first == '-' || first.is_whitespace() {
            return Err(TextError::BadStart { found: first });
        }
        if let Some(last) = text.chars().last()
            && (last == ';' || last.is_whitespace())
        {
            return Err(TextError::BadEnd { found: last });
        }
        Ok(Self::fixed(text, false))
    }

    fn fixed(text: &str, resumes: bool) -> Self {
        Self {
            text: text.to_owned(),
            resumes,
        }
    }

    pub fn resume(text: &str) -> Result<Self, TextError> {
        Self::new(text).map(|t| Self { resumes: true, ..t })
    }

    /// This text, typed over a limit's notice too (`[limits] enabled = false`: no hold at all).
    pub fn over_limits(self) -> Self {
        Self {
            resumes: true,
            ..self
        }
    }

    pub fn wake_prompt() -> Self {
        Self::fixed(WAKE_PROMPT, false)
    }

    pub fn clear() -> Self {
        Self::fixed(CLEAR_COMMAND, false)
    }

    /// The only way a digit is ever typed: `Injector::pick` located the option on screen first.
    pub(crate) fn option_number(number: u8) -> Self {
        Self::fixed(&number.to_string(), true)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn resumes_a_limit(&self) -> bool {
        self.resumes
    }
}

impl std::fmt::Display for KeystrokeText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wake_prompt_is_valid_and_exact() {
        let text = KeystrokeText::new(WAKE_PROMPT).unwrap();
        assert_eq!(text, KeystrokeText::wake_prompt());
        assert_eq!(
            text.as_str(),
            "Check the event bus - a directed event arrived for this session."
        );
    }

    #[test]
    fn accepts_ordinary_messages() {
        for ok in [
            "Continue.",
            "Context is at 85% - checkpoint now",
            "Weiter, bitte: nächster Schritt!",
            "/compact",
            "a",
        ] {
            assert!(KeystrokeText::new(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn rejects_empty() {
        assert_eq!(KeystrokeText::new(""), Err(TextError::Empty));
    }

    #[test]
    fn rejects_control_and_invisible_characters() {
        for bad in [
            "go\r",
            "go\nnow",
            "go\u{1b}[A",
            "tab\there",
            "del\u{7f}",
            "zero\u{200b}width",
            "nb\u{a0}sp",
            "line\u{2028}sep",
            "bidi\u{202e}x",
        ] {
            assert!(
                matches!(KeystrokeText::new(bad), Err(TextError::NotPrintable { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn rejects_leading_digit_dash_or_space() {
        for bad in ["1", "2: Fine", "0 dismiss", "-t %1", " hello"] {
            assert!(
                matches!(KeystrokeText::new(bad), Err(TextError::BadStart { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn rejects_trailing_semicolon_or_space() {
        assert!(matches!(
            KeystrokeText::new("do this;"),
            Err(TextError::BadEnd { found: ';' })
        ));
        assert!(matches!(
            KeystrokeText::new("trailing "),
            Err(TextError::BadEnd { found: ' ' })
        ));
    }

    #[test]
    fn rejects_overlong_text() {
        let long = "a".repeat(MAX_KEYSTROKE_CHARS + 1);
        assert!(matches!(
            KeystrokeText::new(&long),
            Err(TextError::TooLong { .. })
        ));
        assert!(KeystrokeText::new(&"a".repeat(MAX_KEYSTROKE_CHARS)).is_ok());
    }
}
