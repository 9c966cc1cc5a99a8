//! Every known session (the ledger has seen it or panes.json maps it) as `GET /sessions` shows
//! it: the daemon's one answer to "what state is this session in" ([`state_of`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use jiff::tz::TimeZone;

use crate::api::{self, SessionState, SessionStatus};
use crate::claude::hooks::HookKind;
use crate::claude::limits::describe_reset;
use crate::clock;
use crate::http::AppState;
use crate::session::SessionView;
use crate::session::gate::Gate;
use crate::store::{InboxRow, Limit, Pause, RewindFacts, Rewinds, SessionRow};
use crate::wakedir::reader::mapped_panes;
use crate::wakedir::target::PaneTarget;

/// An unmapped session with no trace for this long has ended even without a `SessionEnd` (an
/// agent killed with its pane fires no hook; a working one fires one every tool call).
pub const QUIET_ENDED_AFTER: Duration = Duration::from_secs(24 * 3600);

/// Spools bigger than this are not read to count lines; the size alone is reported.
const COUNT_LINES_MAX_BYTES: u64 = 64 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpoolDetail {
    /// Size and line count (reads each spool).
    Lines,
    /// Size only, for `/metrics`: scraped often, it must not cost more as spools grow.
    Bytes,
}

fn spool_depth(wake_dir: &Path, sid: &str, detail: SpoolDetail) -> (Option<u64>, u64) {
    let path = wake_dir.join(format!("{sid}.jsonl"));
    let Ok(meta) = std::fs::symlink_metadata(&path) else {
        return (Some(0), 0);
    };
    if detail == SpoolDetail::Bytes || !meta.is_file() || meta.len() > COUNT_LINES_MAX_BYTES {
        return (None, meta.len());
    }
    let lines = std::fs::read(&path)
        .map(|b| b.iter().filter(|&&c| c == b'\n').count() as u64)
        .ok();
    (lines, meta.len())
}

pub fn collect(app: &AppState, detail: SpoolDetail) -> Vec<SessionStatus> {
    let gate = app.deliverer.gate();
    let wake_dir = app.deliverer.spool().wake_dir();
    let mapped = mapped_panes(wake_dir);
    let views = app
        .nudges
        .as_ref()
        .map(|views| views.borrow().clone())
        .unwrap_or_default();
    let mut rows: BTreeMap<String, Option<SessionRow>> =
        mapped.keys().map(|k| (k.clone(), None)).collect();
    match app.deliverer.store().sessions() {
        Ok(sessions) => {
            for row in sessions {
                rows.insert(row.session_id.clone(), Some(row));
            }
        }
        Err(e) => tracing::warn!(error = %e, "could not read sessions from the ledger"),
    }
    let rewinds = app.deliverer.store().rewinds().unwrap_or_else(|e| {
        tracing::warn!(error = %e, "could not read rewinds from the ledger");
        Rewinds::default()
    });
    // An id given up at a `/clear` shows as part of the session that has the pane now.
    rows.retain(|sid, _| mapped.contains_key(sid) || !rewinds.renamed(sid));
    let now_ms = clock::now_ms();
    let local = TimeZone::system();
    rows.into_iter()
        .map(|(sid, row)| {
            let pane = mapped.get(&sid);
            let row = row.unwrap_or_else(|| SessionRow {
                session_id: sid.clone(),
                ..SessionRow::default()
            });
            // Rows left from before `[limits] enabled = false` hold nothing now.
            let limit = row.limit.clone().filter(|_| gate.limits_enabled());
            let (spool_lines, spool_bytes) = spool_depth(wake_dir, &sid, detail);
            let view = views.get(&sid);
            let inbox = inbox_status(gate, &sid, row.inbox.as_ref());
            let pause = gate.paused(&sid);
            let reachable = pane.is_some() || inbox.as_ref().is_some_and(|i| i.live);
            let facts = Facts {
                reachable,
                limit: limit.as_ref(),
                owed: row.owed.is_some(),
                busy_marker: gate.is_busy(&sid),
                message_held: inbox.as_ref().is_some_and(|i| i.held),
                paused: pause.is_some(),
                ended: ended(&row, reachable, now_ms),
                view,
            };
            let (state, reason) = state_of(&facts);
            SessionStatus {
                pane: pane.map(pane_of),
                state,
                reason,
                cooldown_remaining_s: gate.cooldown_remaining(&sid).as_secs_f64(),
                last_wake_at: row.last_wake_ms.and_then(clock::shown_ms),
                last_action: row.last_action,
                last_delivery_at: row.last_delivery_ms.and_then(clock::shown_ms),
                last_error_kind: row.last_error_kind,
                last_hook_event: row.last_hook_event,
                last_seen_at: row.last_seen_ms.and_then(clock::shown_ms),
                cwd: row.cwd,
                transcript_path: row.transcript_path,
                spool_lines,
                spool_bytes,
                context: app.context.status(&sid),
                // The loop's view when it runs; else what the ledger last recorded.
                nudge: match view {
                    Some(v) => Some(api::Nudge {
                        unanswered: v.unanswered,
                        last_nudge_at: v.last_nudge_ms.and_then(clock::shown_ms),
                        next_nudge_at: v.next_nudge_at_ms.and_then(clock::shown_ms),
                        acknowledged: v.acknowledged,
                        idle_since: v.idle_since_ms.and_then(clock::shown_ms),
                    }),
                    None => row.nudge.map(|n| api::Nudge {
                        unanswered: n.unanswered,
                        last_nudge_at: n.last_nudge_ms.and_then(clock::shown_ms),
                        next_nudge_at: None,
                        acknowledged: n.acknowledged,
                        idle_since: None,
                    }),
                },
                owed: row.owed.and_then(|o| {
                    Some(api::Owed {
                        events: u64::from(o.events),
                        since: clock::shown_ms(o.since_ms)?,
                    })
                }),
                paid: row.paid.and_then(|p| {
                    Some(api::Paid {
                        last_at: clock::shown_ms(p.last_ms)?,
                        last_how: p.last_how.as_str().to_owned(),
                        last_events: u64::from(p.last_events),
                        by_hook: p.by_hook,
                        by_typing: p.by_typing,
                        by_inbox: p.by_inbox,
                    })
                }),
                limit: limit.and_then(|l| limit_status(&l, now_ms, &local)),
                rewind: rewind_status(&rewinds.facts(&sid), &local),
                inbox,
                pause: pause.and_then(pause_status),
                session_id: sid,
            }
        })
        .collect()
}

/// A pause as `/sessions` shows it; `None` for a time the wire cannot carry.
pub(super) fn pause_status(pause: Pause) -> Option<api::Pause> {
    Some(api::Pause {
        since: clock::shown_ms(pause.since_ms)?,
        until: pause.until_ms.and_then(clock::shown_ms),
        all: pause.all,
    })
}

/// The session's inbox as the gate would use it now, and the newest send; `None` when no hook
/// announced one and nothing was sent (or inboxes are off).
fn inbox_status(gate: &Gate, sid: &str, row: Option<&InboxRow>) -> Option<api::Inbox> {
    let reach = gate.reach(sid);
    let announced = row.is_some_and(|r| r.inbox.is_some() || r.sent_ms.is_some());
    let problem = match &reach {
        Ok(Some(_)) => None,
        Ok(None) if !announced => return None,
        Ok(None) if !gate.inboxes_on() => Some("inboxes are off ([wake] inbox = false)".into()),
        Ok(None) => Some("no inbox announced by its hooks or Claude Code's registry".into()),
        Err(why) => Some(why.to_string()),
    };
    Some(api::Inbox {
        live: matches!(reach, Ok(Some(_))),
        problem,
        last_sent_at: row.and_then(|r| r.sent_ms).and_then(clock::shown_ms),
        heard_at: row.and_then(|r| r.heard_ms).and_then(clock::shown_ms),
        held: gate.message_held(sid),
    })
}

/// What decides a session's one state.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    /// Mapped in panes.json, or with a live inbox.
    pub reachable: bool,
    pub limit: Option<&'a Limit>,
    pub owed: bool,
    /// A fresh busy marker.
    pub busy_marker: bool,
    /// Claude Code holds the last message to its inbox for a human.
    pub message_held: bool,
    /// A person paused it.
    pub paused: bool,
    pub ended: bool,
    /// The session loop's last decision, once it has made one.
    pub view: Option<&'a SessionView>,
}

/// Most pressing first: ended, no pane, a usage limit, then the session loop's last decision
/// (before its first, the busy marker's); owed when events wait and nothing more pressing holds.
pub fn state_of(facts: &Facts) -> (SessionState, String) {
    if facts.ended {
        return (
            SessionState::Ended,
            "no pane, and ended or quiet for a day".into(),
        );
    }
    if !facts.reachable {
        return (
            SessionState::NoPane,
            "no pane in panes.json and no live inbox; events are spooled only".into(),
        );
    }
    if facts.paused {
        return (
            SessionState::Paused,
            "paused by a person: nothing reaches it, its events are owed; `wakebridge unpause`"
                .into(),
        );
    }
    if let Some(limit) = facts.limit {
        let reason = if limit.gave_up {
            "at its usage limit; resumes ran out, held until it shows life"
        } else {
            "at its usage limit: held, resumed at the reset"
        };
        let reason = match facts.view {
            Some(view) if view.state == SessionState::Limited => view.reason.clone(),
            _ => reason.into(),
        };
        return (SessionState::Limited, reason);
    }
    if facts.message_held {
        return (
            SessionState::Dialog,
            "a message to its inbox is held for a human (bypass mode): Deliver or Deny it, or \
             allow it with `wakebridge claude install --accept-session-messages`"
                .into(),
        );
    }
    let (decided, reason) = match facts.view {
        // The loop decides limits only from the ledger's row, which is gone now.
        Some(view) if view.state != SessionState::Limited => (view.state, view.reason.clone()),
        _ if facts.busy_marker => (
            SessionState::Working,
            "fresh busy marker: a turn is running".into(),
        ),
        _ => (SessionState::Idle, "no fresh busy marker".into()),
    };
    if facts.owed && decided > SessionState::Owed {
        return (SessionState::Owed, reason);
    }
    (decided, reason)
}

/// No pane, nothing owed, and `SessionEnd` seen or quiet for [`QUIET_ENDED_AFTER`].
fn ended(row: &SessionRow, reachable: bool, now_ms: i64) -> bool {
    if reachable || row.owed.is_some() {
        return false;
    }
    let said_so = row
        .last_hook_event
        .as_deref()
        .is_some_and(|e| HookKind::of_recorded(e) == HookKind::Ended);
    let last = [row.last_seen_ms, row.last_delivery_ms, row.last_wake_ms]
        .into_iter()
        .flatten()
        .chain(row.paid.map(|p| p.last_ms))
        .max();
    let quiet_ms = clock::duration_ms(QUIET_ENDED_AFTER);
    said_so || last.is_none_or(|at| now_ms.saturating_sub(at) > quiet_ms)
}

fn pane_of(target: &PaneTarget) -> api::Pane {
    let session = match target {
        PaneTarget::Tmux { session, .. } => session.clone(),
        PaneTarget::Zellij { session, .. } => Some(session.clone()),
    };
    api::Pane {
        mux: target.mux_name().to_owned(),
        pane: target.pane().to_owned(),
        session,
    }
}

fn limit_status(limit: &Limit, now_ms: i64, local: &TimeZone) -> Option<api::Limit> {
    Some(api::Limit {
        kind: limit.kind.clone(),
        resets_at: limit.resets_at_ms.and_then(clock::shown_ms),
        resets_text: limit.resets_text.clone(),
        seen_how: limit.how.as_str().to_owned(),
        since: clock::shown_ms(limit.since_ms)?,
        tries: limit.tries,
        gave_up: limit.gave_up,
        shown: describe_reset(limit.resets_at_ms, now_ms, local),
    })
}

fn rewind_status(facts: &RewindFacts, local: &TimeZone) -> Option<api::Rewind> {
    if facts.pending.is_none() && facts.last.is_none() && facts.formerly.is_empty() {
        return None;
    }
    let last = facts.last.as_ref();
    let last_at = last.and_then(|r| r.done_ms);
    let clock = last_at
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map(|at| {
            at.to_zoned_datetime(local.clone())
                .strftime("%H:%M")
                .to_string()
        });
    let mut shown = match (facts.performed, clock) {
        (0, _) => "not rewound yet".to_owned(),
        (n, Some(clock)) => format!("rewound {n}\u{d7}, last {clock}"),
        (n, None) => format!("rewound {n}\u{d7}"),
    };
    if let Some(waiting) = &facts.pending {
        shown.push_str(&format!(" ({} rewind waiting)", waiting.why.as_str()));
    }
    Some(api::Rewind {
        performed: facts.performed,
        last_at: last_at.and_then(clock::shown_ms),
        last_why: last.map(|r| r.why.as_str().to_owned()),
        last_outcome: last.and_then(|r| r.outcome).map(|o| o.as_str().to_owned()),
        last_detail: last.and_then(|r| r.detail.clone()),
        waiting: facts.pending.as_ref().map(|r| r.why.as_str().to_owned()),
        formerly: facts.formerly.clone(),
        shown,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::LimitSource;

    fn view(state: SessionState) -> SessionView {
        SessionView {
            state,
            reason: "the loop's words".into(),
            unanswered: 0,
            last_nudge_ms: None,
            next_nudge_at_ms: None,
            acknowledged: false,
            idle_since_ms: None,
        }
    }

    fn facts(view: Option<&SessionView>) -> Facts<'_> {
        Facts {
            reachable: true,
            limit: None,
            owed: false,
            busy_marker: false,
            message_held: false,
            paused: false,
            ended: false,
            view,
        }
    }

    #[test]
    fn the_most_pressing_state_wins() {
        let limit = Limit {
            kind: "5-hour limit".into(),
            resets_text: None,
            resets_at_ms: None,
            how: LimitSource::Hook,
            since_ms: 0,
            tries: 0,
            last_try_ms: None,
            gave_up: false,
        };
        let dialog = view(SessionState::Dialog);
        let working = view(SessionState::Working);
        let idle = view(SessionState::AcknowledgedIdle);
        let state = |f: Facts| state_of(&f).0;
        assert_eq!(
            state(Facts {
                ended: true,
                reachable: false,
                ..facts(None)
            }),
            SessionState::Ended
        );
        assert_eq!(
            state(Facts {
                reachable: false,
                ..facts(Some(&working))
            }),
            SessionState::NoPane
        );
        assert_eq!(
            state(Facts {
                limit: Some(&limit),
                ..facts(Some(&dialog))
            }),
            SessionState::Limited
        );
        assert_eq!(
            state(Facts {
                message_held: true,
                owed: true,
                ..facts(Some(&working))
            }),
            SessionState::Dialog,
            "a message held for a human waits on them, whatever the loop saw"
        );
        // Owed shows over a running turn or an idle session, not over a dialog.
        assert_eq!(
            state(Facts {
                owed: true,
                ..facts(Some(&working))
            }),
            SessionState::Owed
        );
        assert_eq!(
            state(Facts {
                owed: true,
                ..facts(Some(&idle))
            }),
            SessionState::Owed
        );
        assert_eq!(
            state(Facts {
                owed: true,
                ..facts(Some(&dialog))
            }),
            SessionState::Dialog
        );
        assert_eq!(state(facts(Some(&idle))), SessionState::AcknowledgedIdle);
        // Before the loop's first look, the busy marker decides.
        assert_eq!(
            state(Facts {
                busy_marker: true,
                ..facts(None)
            }),
            SessionState::Working
        );
        assert_eq!(state(facts(None)), SessionState::Idle);
        assert_eq!(state_of(&facts(Some(&dialog))).1, "the loop's words");
    }

    #[test]
    fn a_session_ends_by_saying_so_or_a_day_of_quiet_never_with_a_pane_or_owed_events() {
        let now = 10 * 86_400_000;
        let row = |event: &str, seen_ago_ms: i64| SessionRow {
            session_id: "s".into(),
            last_hook_event: Some(event.into()),
            last_seen_ms: Some(now - seen_ago_ms),
            ..SessionRow::default()
        };
        assert!(ended(&row("SessionEnd", 60_000), false, now));
        assert!(!ended(&row("SessionEnd", 60_000), true, now), "mapped");
        assert!(!ended(&row("Stop", 60_000), false, now));
        assert!(ended(&row("Stop", 2 * 86_400_000), false, now));
        let owed = SessionRow {
            owed: Some(crate::store::Owed {
                events: 1,
                since_ms: 0,
            }),
            ..row("SessionEnd", 3 * 86_400_000)
        };
        assert!(!ended(&owed, false, now), "owed events wait for it");
    }
}
