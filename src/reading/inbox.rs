//! The inbox a session's hooks announce ([`Inbox`]): where it is told things without a
//! keystroke, and why telling it failed ([`InboxError`]). Sending is `agent::inbox`'s, by the
//! agent's own socket.

use std::path::PathBuf;

use sha2::{Digest, Sha256};

/// The same text is not sent again within this long: Claude Code drops it from the same sender
/// without a word.
pub const DUPLICATE_WINDOW: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a message may go unreported by the session's `UserPromptSubmit` hook (nor any prompt
/// follow it) before the inbox counts as not delivering: an idle session reports it within a
/// second and a busy one at its next tool call, so a longer silence is a message Claude Code
/// refused, dropped or a human denied, and the next wake is typed instead.
pub const UNHEARD_AFTER: std::time::Duration = std::time::Duration::from_secs(120);

/// A session's inbox as it was announced: Claude Code's own socket, or (with a `thread`) a Codex
/// session's control socket and the thread it serves there, which `agent::inbox` sends through
/// `codex::control` instead.
#[derive(Clone, PartialEq, Eq)]
pub struct Inbox {
    pub socket: PathBuf,
    /// Only classifies the sender (a message without it is delivered too); never logged.
    pub token: Option<String>,
    pub pid: Option<u32>,
    /// Codex CLI: the thread (its session id) the control socket `socket` serves; `None`: Claude
    /// Code's own inbox socket.
    pub thread: Option<String>,
}

impl std::fmt::Debug for Inbox {
    // The token stays out of every log line and error.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbox")
            .field("socket", &self.socket)
            .field("token", &self.token.as_ref().map(|_| "…"))
            .field("pid", &self.pid)
            .field("thread", &self.thread)
            .finish()
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq, strum::IntoStaticStr, strum::VariantNames)]
pub enum InboxError {
    #[error("no inbox socket at {0}: the session exited or never bound one")]
    #[strum(serialize = "inbox-gone")]
    Gone(PathBuf),
    #[error("{0} is a symlink, not the session's socket; not used")]
    #[strum(serialize = "inbox-untrusted")]
    Symlink(PathBuf),
    #[error("{0} is not a socket; not used")]
    #[strum(serialize = "inbox-untrusted")]
    NotASocket(PathBuf),
    #[error("{0} belongs to another user; not used")]
    #[strum(serialize = "inbox-untrusted")]
    NotOurs(PathBuf),
    #[error("{0} lies in a directory others can enter; not used")]
    #[strum(serialize = "inbox-untrusted")]
    OpenDirectory(PathBuf),
    #[error("the session's process {0} is gone")]
    #[strum(serialize = "inbox-dead")]
    DeadProcess(u32),
    #[error("the message is {0} bytes, over the inbox's line limit")]
    #[strum(serialize = "inbox-too-long")]
    TooLong(usize),
    #[error("the inbox at {0} refused the connection (nobody listening)")]
    #[strum(serialize = "inbox-refused")]
    Refused(PathBuf),
    #[error("the inbox at {0} did not take the message within the budget")]
    #[strum(serialize = "inbox-timeout")]
    Timeout(PathBuf),
    #[error("writing to the inbox at {path} failed: {error}")]
    #[strum(serialize = "inbox-io")]
    Io { path: PathBuf, error: String },
    #[error("{0}")]
    #[strum(serialize = "inbox-untrusted")]
    Untrusted(String),
    #[error("{0}")]
    #[strum(serialize = "inbox-not-open")]
    NotOpen(String),
}

impl InboxError {
    /// Every [`InboxError::kind`] (`inbox-untrusted` four times), for the error counters' zeros.
    pub const KINDS: &[&str] = <Self as strum::VariantNames>::VARIANTS;

    /// Short machine-readable kind (ledger rows, metrics).
    pub fn kind(&self) -> &'static str {
        self.into()
    }
}

/// How a sent text is recognised when the session's `UserPromptSubmit` hook reports it (the
/// ledger keeps this, not the text).
pub fn digest(text: &str) -> String {
    hex::encode(&Sha256::digest(text.as_bytes())[..16])
}
