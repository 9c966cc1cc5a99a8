//! The gate's path through a session's own inbox (Claude Code's socket, 2.1.224+; Codex CLI's
//! control socket): where the inbox is and whether it delivers, the send under the same limit holds and cooldown as typing, and the
//! texts that are always typed. `None` from [`Gate::send`] hands the wake to the typed path.

use std::sync::Arc;

use tokio::time::Instant;

use super::{Gate, GateOutcome, Mode};
use crate::agent;
use crate::api::Action;
use crate::clock;
use crate::deadline::Deadline;
use crate::mux::{INJECT_BUDGET, KeystrokeText};
use crate::reading::inbox::{self, Inbox};
use crate::reading::registry::SessionList;
use crate::store::{InboxRow, Record};
use crate::wire::session_id::short;

/// Why a session's inbox is not used now.
#[derive(Debug, thiserror::Error)]
pub enum Unusable {
    #[error(
        "its last message went unheard (refused, dropped or denied): wakes are typed until the \
         session takes a prompt again"
    )]
    Unheard,
    #[error("{0}")]
    Checked(inbox::InboxError),
    #[error("its process {0} now runs another session: the session it was announced for ended")]
    Reused(u32),
}

impl Gate {
    /// Tell sessions through their inboxes, looked up in the ledger (their hooks'), else in
    /// `registry`, the agent's list of live sessions.
    pub fn with_inboxes(mut self, registry: Option<Arc<dyn SessionList>>) -> Self {
        self.inboxes = true;
        self.registry = registry;
        self
    }

    pub fn inboxes_on(&self) -> bool {
        self.inboxes
    }

    /// `sid`'s inbox if it can be told through now: announced by its hook (its ledger `row`),
    /// else `registered` in Claude Code's registry; a private socket of ours whose process is
    /// alive and runs `sid` as far as the registry says; and not one that left the last message
    /// unheard, unless Claude Code holds it for a human (`held`, asked only then: it may read
    /// the transcript's tail).
    pub fn reach_from(
        &self,
        sid: &str,
        row: Option<&InboxRow>,
        registered: Option<Inbox>,
        held: impl FnOnce() -> bool,
    ) -> Result<Option<Inbox>, Unusable> {
        if !self.inboxes {
            return Ok(None);
        }
        let announced = row.and_then(|row| row.inbox.clone());
        let Some(inbox) = announced.or(registered) else {
            return Ok(None);
        };
        // The cheap checks first: the session loop asks this of every session each poll.
        agent::inbox::check(&inbox).map_err(Unusable::Checked)?;
        // A pid is reused: its socket path then belongs to another session.
        if let Some(pid) = inbox.pid
            && (self.registry.as_deref())
                .and_then(|list| list.session_of_pid(pid))
                .is_some_and(|other| other != sid)
        {
            return Err(Unusable::Reused(pid));
        }
        // `held` is asked only of a message gone unanswered: it may read the transcript.
        let unanswered = row.is_some_and(|row| row.unanswered_since().is_some());
        let held = unanswered && held();
        if row
            .and_then(|row| row.unheard_since(clock::now_ms(), held))
            .is_some()
        {
            return Err(Unusable::Unheard);
        }
        Ok(Some(inbox))
    }

    /// Tells `sid` through its inbox; `None` when that failed and it has a pane to type into.
    pub(super) async fn send(
        &self,
        sid: &str,
        inbox: &Inbox,
        text: &KeystrokeText,
        mode: Mode,
        has_pane: bool,
    ) -> Option<GateOutcome> {
        // A running turn is no reason to wait: the inbox hands the message over between tool
        // calls, and a draft or a dialog on screen is never touched.
        let Some(reservation) = self.reserve(sid, mode == Mode::Forced) else {
            return Some(GateOutcome::skipped(Action::SpoolCooldown));
        };
        let text = self.typing(sid, |t| {
            t.sent
                .retain(|(_, at)| at.elapsed() < inbox::DUPLICATE_WINDOW);
            unrepeated(text.as_str(), &t.sent)
        });
        let digest = inbox::digest(&text);
        let (started, began_ms) = (Instant::now(), clock::now_ms());
        match agent::inbox::send(inbox, &text, Deadline::after(INJECT_BUDGET)).await {
            Ok(()) => {
                let now = Instant::now();
                self.typing(sid, |t| t.sent.push((digest.clone(), now)));
                self.woke(sid, now);
                let sent = Record::InboxSent {
                    session_id: sid.to_owned(),
                    digest,
                    at_ms: began_ms,
                };
                if let Err(e) = self.store.record_queued(sent) {
                    tracing::warn!(error = %e, "could not record an inbox message in the ledger");
                }
                tracing::info!(session_id = sid, "Woke {} through its inbox", short(sid));
                Some(GateOutcome {
                    action: Action::Inbox,
                    error_kind: None,
                    inject_time: started.elapsed(),
                })
            }
            Err(error) => {
                self.roll_back(sid, reservation);
                let kind = error.kind();
                crate::telemetry::error(kind);
                let fallback = if has_pane {
                    "typed instead"
                } else {
                    "spooled only"
                };
                crate::warn_or_debug!(
                    self.first_failure(sid, kind),
                    session_id = sid,
                    kind,
                    "Inbox of {} failed ({error}); {fallback}",
                    short(sid)
                );
                (!has_pane).then(|| GateOutcome {
                    action: Action::SpoolMuxFailed,
                    error_kind: Some(kind),
                    inject_time: started.elapsed(),
                })
            }
        }
    }
}

/// `text`, numbered (`… (#2)`) if it went to the same inbox within Claude Code's duplicate
/// window: Claude Code drops a repeat from the same sender then without a word, and a second
/// bus event during a turn is news the first message did not carry. Ends: one of the first
/// `recent.len() + 1` numbers is free.
fn unrepeated(text: &str, recent: &[(String, Instant)]) -> String {
    let numbered = (2..).map(|n| format!("{text} (#{n})"));
    let sent = |candidate: &String| {
        let digest = inbox::digest(candidate);
        recent.iter().any(|(d, _)| *d == digest)
    };
    let mut candidates = std::iter::once(text.to_owned()).chain(numbered);
    candidates
        .find(|candidate| !sent(candidate))
        .unwrap_or_default()
}
