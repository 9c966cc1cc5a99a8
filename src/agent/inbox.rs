//! Telling a session something without a keystroke, whichever agent it runs: Claude Code's own
//! inbox socket (`claude::inbox`), or Codex CLI's control socket serving the session's thread
//! (`codex::control`). The ledger keeps both as one [`Inbox`] row; a `thread` says which.

use crate::claude::inbox as claude_inbox;
use crate::codex::control::{self, ControlError};
use crate::deadline::Deadline;
use crate::reading::inbox::{Inbox, InboxError};

/// Whether `inbox` can be sent to now (the cheap checks: no connection).
pub fn check(inbox: &Inbox) -> Result<(), InboxError> {
    match &inbox.thread {
        Some(_) => control::check(&inbox.socket)
            .map(drop)
            .map_err(from_control),
        None => claude_inbox::check(inbox),
    }
}

/// Sends `text` through `inbox` within `deadline`.
pub async fn send(inbox: &Inbox, text: &str, deadline: Deadline) -> Result<(), InboxError> {
    match &inbox.thread {
        Some(thread) => {
            (control::send(&inbox.socket, thread, text, deadline).await).map_err(from_control)
        }
        None => claude_inbox::send(inbox, text, deadline).await,
    }
}

fn from_control(e: ControlError) -> InboxError {
    match e {
        ControlError::Gone(path) => InboxError::Gone(path),
        ControlError::Untrusted(_) => InboxError::Untrusted(e.to_string()),
        ControlError::NotOpen(_) => InboxError::NotOpen(e.to_string()),
        ControlError::Timeout => InboxError::Timeout(Default::default()),
        ControlError::Answered { .. } => InboxError::Io {
            path: Default::default(),
            error: e.to_string(),
        },
        ControlError::Io { path, error } => InboxError::Io { path, error },
    }
}
