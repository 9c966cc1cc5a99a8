//! [`SessionId`]: the one rule for a session id taken from outside, `[A-Za-z0-9_-]{1,64}` (the
//! reference's), safe as a file name, in a log line and in a terminal. Busy markers keep the
//! reference CLI's wider rule (`wakedir::markers`).

use std::fmt;
use std::ops::Deref;

pub const MAX_SESSION_ID_LEN: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(String);

impl SessionId {
    /// `id` if it matches `[A-Za-z0-9_-]{1,64}` in full.
    pub fn parse(id: &str) -> Option<Self> {
        Self::is_valid(id).then(|| Self(id.to_owned()))
    }

    pub fn is_valid(id: &str) -> bool {
        !id.is_empty()
            && id.len() <= MAX_SESSION_ID_LEN
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for SessionId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<&str> for SessionId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl From<SessionId> for String {
    fn from(id: SessionId) -> String {
        id.0
    }
}

/// The first 8 characters of a session id and `...`, as the reference's log lines show it.
pub fn short(id: &str) -> String {
    let head: String = id.chars().take(8).collect();
    format!("{head}...")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_up_to_64_safe_characters_are_accepted() {
        assert!(SessionId::is_valid("067fd316-8cc7-5cb1-861f-4d9d67ba7ee8"));
        assert!(SessionId::is_valid("brave_trex-2"));
        assert!(SessionId::is_valid(&"a".repeat(64)));
        assert!(!SessionId::is_valid(&"a".repeat(65)));
    }

    #[test]
    fn ids_that_could_leave_a_directory_or_a_line_are_refused() {
        for bad in ["", ".", "..", "a/b", "a b", "é", "a\nb", "a.b"] {
            assert!(SessionId::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn short_keeps_eight_characters() {
        assert_eq!(short("0123456789"), "01234567...");
        assert_eq!(short("ab"), "ab...");
    }
}
