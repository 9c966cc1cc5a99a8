//! Doctor's line per session on its inbox: whether wakebridge's messages reach it there and,
//! when not, why (its Claude Code, the feature off, the daemon's verdict, who may message it)
//! with the fix. Pure but for reading a transcript's first lines.

use std::io::Read;
use std::path::Path;

use super::{Check, short};
use crate::api::SessionStatus;
use crate::claude::registry::Announced;
use crate::claude::settings::INBOUND_KEY;

/// The first Claude Code with an inbox.
const INBOX_SINCE: [u64; 3] = [2, 1, 224];
/// How much of a transcript is read for its permission mode: the record is among the first.
const TRANSCRIPT_HEAD_BYTES: u64 = 8 * 1024;
const ACCEPT_MESSAGES: &str = "wakebridge claude install --accept-session-messages (then any \
     process of yours can message your sessions too)";

/// The first [`TRANSCRIPT_HEAD_BYTES`] of a transcript; `None` when it cannot be read.
pub(super) fn transcript_head(path: &Path) -> Option<Vec<u8>> {
    let file = crate::private_fs::open_read(path).ok()?;
    let mut head = Vec::new();
    file.take(TRANSCRIPT_HEAD_BYTES)
        .read_to_end(&mut head)
        .ok()?;
    Some(head)
}

/// Whether a transcript's `permission-mode` record says bypass mode; `None`: the head has none.
pub(super) fn started_in_bypass(head: &[u8]) -> Option<bool> {
    head.split(|b| *b == b'\n').find_map(|line| {
        let record: serde_json::Value = serde_json::from_slice(line).ok()?;
        (record["type"] == "permission-mode")
            .then(|| record["permissionMode"] == "bypassPermissions")
    })
}

/// Whether `version` (`2.1.100`, maybe followed by words) is older than the first with an inbox.
pub(super) fn predates_inbox(version: &str) -> bool {
    let number = version.split_whitespace().next().unwrap_or_default();
    let parts: Option<Vec<u64>> = number.split('.').map(|p| p.parse().ok()).collect();
    parts.is_some_and(|parts| parts[..] < INBOX_SINCE[..])
}

/// What doctor read about a session's inbox besides `/sessions`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct InboxFacts {
    /// Claude Code's live registry entry for it (`None`: none, or the process is gone).
    pub(super) announced: Option<Announced>,
    /// Whether its transcript says it runs in bypass mode (`None`: it does not say).
    pub(super) bypass: Option<bool>,
}

/// Whether wakebridge's messages reach a session through its inbox, and when not, why. Never
/// a failure: without an inbox a wake is typed into the pane, which its own lines check.
pub(super) fn inbox_check(
    session: &SessionStatus,
    facts: &InboxFacts,
    inbound: Option<&serde_json::Value>,
) -> Check {
    let sid = short(&session.session_id);
    let warn = |found: String, fix: &str| Check::warn("inbox", found, fix);
    let typed = match session.pane {
        Some(_) => "; wakes are typed into its pane",
        None => "; it has no pane either, so nothing reaches it",
    };
    let announced = facts.announced.as_ref();
    let version = announced.and_then(|a| a.version.as_deref());
    if let Some(version) = version.filter(|v| predates_inbox(v)) {
        return warn(
            format!("{sid}: Claude Code {version} has no inbox{typed}"),
            "update Claude Code to 2.1.224+ and restart the session",
        );
    }
    if announced.is_some_and(|a| a.socket.is_none()) {
        return warn(
            format!(
                "{sid}: its inbox is off (--bare, CLAUDE_CODE_HARBOR_KITE=0 or the feature flag){typed}"
            ),
            "start it without --bare, CLAUDE_CODE_SIMPLE or CLAUDE_CODE_HARBOR_KITE=0; \
             \"tengu_harbor_kite\": false in ~/.claude.json's cachedGrowthBookFeatures is \
             Claude Code's server flag, and passes only when the server turns it on",
        );
    }
    match (&session.inbox, announced) {
        (Some(inbox), _) if inbox.held => {
            return warn(
                format!(
                    "{sid}: a message to its inbox waits for a human (Deliver or Deny on its screen)"
                ),
                "answer it in the session; to let wakebridge's messages through in bypass mode, \
                 run `wakebridge claude install --accept-session-messages`",
            );
        }
        (Some(inbox), _) if !inbox.live => {
            let problem = inbox
                .problem
                .as_deref()
                .unwrap_or("the daemon did not say why");
            return warn(
                format!("{sid}: its inbox cannot be used: {problem}{typed}"),
                "restart the session if it should be running; an ended one is dropped by itself",
            );
        }
        (None, None) => {
            return warn(
                format!("{sid}: no inbox announced, by its hooks or Claude Code's registry{typed}"),
                "run Claude Code 2.1.224+ with the hooks installed (wakebridge claude install)",
            );
        }
        _ => {}
    }
    let live = format!("{sid}: inbox live");
    let waits = "each message waits for a human to deliver it";
    let but = match (inbound.map(|v| v.as_str()), facts.bypass) {
        (Some(Some("accept")), _) | (None, Some(false)) => return Check::ok("inbox", live),
        (None, None) => {
            let unset = format!("in bypass mode it would hold messages: {INBOUND_KEY} is unset");
            return Check::ok("inbox", format!("{live} ({unset})"));
        }
        (None, Some(true)) => format!("it runs in bypass mode and {INBOUND_KEY} is unset: {waits}"),
        (Some(Some("hold")), _) => format!("{INBOUND_KEY} is \"hold\": {waits}"),
        (Some(Some("refuse")), _) => {
            format!("{INBOUND_KEY} is \"refuse\": Claude Code drops every message")
        }
        (Some(_), _) => {
            let value = inbound.map(ToString::to_string).unwrap_or_default();
            return warn(
                format!(
                    "{live}, but {INBOUND_KEY} is {value}, which is not \"accept\", \"hold\" or \"refuse\""
                ),
                "set it to one of those in Claude Code's settings.json",
            );
        }
    };
    warn(format!("{live}, but {but}"), ACCEPT_MESSAGES)
}
