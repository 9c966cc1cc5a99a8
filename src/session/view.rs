//! A session as `/sessions`, `/metrics` and `wakebridge status` show it, rendered by the loop
//! from the session's value (the state its last decision showed, its nudge series, its context)
//! and the tick's facts: no second precedence, nothing read when it is served. Also the rules
//! the loop looks at a session by that only its facts decide: whether it ended, whether it is
//! kept.

use jiff::tz::TimeZone;

use crate::api;
use crate::clock;
use crate::reading::hook::HookKind;
use crate::reading::limit::describe_reset;
use crate::session::Keep;
use crate::session::io::SessionFacts;
use crate::session::observe::Activity;
use crate::session::state::Session;
use crate::store::{Limit, Pause, RewindFacts, SessionRow};
use crate::wakedir::target::PaneTarget;

/// An unreachable session with no trace for this long has ended even without a `SessionEnd` (an
/// agent killed with its pane fires no hook; a working one fires one every tool call).
pub const QUIET_ENDED_AFTER: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Its view: `next_nudge_at` (unix ms) while a nudge is scheduled; `watched`: why it is only
/// watched.
pub struct Rendered<'a> {
    pub pane: Option<&'a PaneTarget>,
    pub next_nudge_at: Option<i64>,
    pub watched: Option<&'a str>,
    pub now_ms: i64,
    pub local: &'a TimeZone,
}

pub fn render(sid: &str, session: &Session, r: Rendered) -> api::SessionStatus {
    use api::SessionState::{Ended, NoPane};
    let facts = &session.facts;
    let row = &facts.row;
    let (state, reason) = session.shown.clone();
    let looks_idle = matches!(
        state,
        api::SessionState::Idle
            | api::SessionState::Nudged
            | api::SessionState::AcknowledgedIdle
            | api::SessionState::Owed
    );
    // A session nothing reaches is not nudged, whatever its series says.
    let unreached = matches!(state, Ended | NoPane);
    let nudge = api::Nudge {
        unanswered: session.count.unanswered,
        last_nudge_at: session.last_nudge_ms.and_then(clock::shown_ms),
        next_nudge_at: (r.next_nudge_at.filter(|_| !unreached)).and_then(clock::shown_ms),
        acknowledged: session.acknowledged,
        idle_since: looks_idle
            .then(|| session.activity.as_ref().map(Activity::quiet_since_ms))
            .flatten()
            .and_then(clock::shown_ms),
    };
    let nudged = nudge.unanswered > 0 || nudge.acknowledged || nudge.last_nudge_at.is_some();
    api::SessionStatus {
        session_id: sid.to_owned(),
        agent: row.agent,
        pane: r.pane.map(pane_of),
        state,
        reason,
        // Filled when served: the cooldown runs on between two ticks.
        cooldown_remaining_s: 0.0,
        last_wake_at: row.last_wake_ms.and_then(clock::shown_ms),
        last_action: row.last_action.clone(),
        last_delivery_at: row.last_delivery_ms.and_then(clock::shown_ms),
        last_error_kind: row.last_error_kind.clone(),
        last_hook_event: row.last_hook_event.clone(),
        last_seen_at: row.last_seen_ms.and_then(clock::shown_ms),
        cwd: row.cwd.clone(),
        transcript_path: row.transcript_path.clone(),
        spool_lines: None,
        spool_bytes: 0,
        context: session.context.status(),
        nudge: (nudged || !unreached).then_some(nudge),
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
        limit: (row.limit.as_ref()).and_then(|l| limit_status(l, r.now_ms, r.local)),
        rewind: rewind_status(&facts.rewind, r.local),
        inbox: inbox_status(facts, r.now_ms),
        pause: facts.pause.and_then(pause_status),
        watched: r.watched.map(str::to_owned),
    }
}

/// A pause as `/sessions` shows it; `None` for a time the wire cannot carry.
pub fn pause_status(pause: Pause) -> Option<api::Pause> {
    Some(api::Pause {
        since: clock::shown_ms(pause.since_ms)?,
        until: pause.until_ms.and_then(clock::shown_ms),
        all: pause.all,
    })
}

/// The session's inbox as the gate would use it now, and the newest send; `None` when no hook
/// announced one and nothing was sent.
fn inbox_status(facts: &SessionFacts, now_ms: i64) -> Option<api::Inbox> {
    let row = facts.row.inbox.as_ref();
    let problem = match &facts.inbox {
        Ok(Some(_)) => None,
        Ok(None) => return None,
        Err(why) => Some(why.clone()),
    };
    Some(api::Inbox {
        live: problem.is_none(),
        problem,
        last_sent_at: row.and_then(|r| r.sent_ms).and_then(clock::shown_ms),
        heard_at: row.and_then(|r| r.heard_ms).and_then(clock::shown_ms),
        held: facts.message_held,
        unheard_since: (row.and_then(|r| r.unheard_since(now_ms, facts.message_held)))
            .and_then(clock::shown_ms),
    })
}

/// Whether a session nothing reaches (`reachable` false) is over: nothing owed, and `SessionEnd`
/// seen or no trace for [`QUIET_ENDED_AFTER`] at `now_ms`.
pub fn ended(row: &SessionRow, reachable: bool, now_ms: i64) -> bool {
    if reachable || row.owed.is_some() {
        return false;
    }
    let said_so = (row.last_hook_event.as_deref())
        .is_some_and(|e| HookKind::of_recorded(e) == HookKind::Ended);
    let last = [row.last_seen_ms, row.last_delivery_ms, row.last_wake_ms]
        .into_iter()
        .flatten()
        .chain(row.paid.map(|p| p.last_ms))
        .max();
    let quiet_ms = clock::duration_ms(QUIET_ENDED_AFTER);
    said_so || last.is_none_or(|at| now_ms.saturating_sub(at) > quiet_ms)
}

/// Whether wakebridge keeps the session (nudges it, resumes it, rewinds it on its own) or only
/// watches it, and why: one rule, the same for a pane and an inbox.
pub fn kept(facts: &SessionFacts, keep: Keep) -> Result<(), &'static str> {
    match keep {
        Keep::All => Ok(()),
        Keep::Agents if facts.row.kept || facts.row.told_ms.is_some() => Ok(()),
        Keep::Agents => Err(
            "[nudger] keep = \"agents\", and it was neither started by `wakebridge launch` or \
             with WAKEBRIDGE=keep, nor told anything by the bus or `wakebridge wake`",
        ),
    }
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

    #[test]
    fn a_session_ends_by_saying_so_or_a_day_of_quiet_never_when_reachable_or_owed() {
        let now = 10 * 86_400_000;
        let row = |event: &str, seen_ago_ms: i64| SessionRow {
            session_id: "s".into(),
            last_hook_event: Some(event.into()),
            last_seen_ms: Some(now - seen_ago_ms),
            ..SessionRow::default()
        };
        assert!(ended(&row("SessionEnd", 60_000), false, now));
        assert!(!ended(&row("SessionEnd", 60_000), true, now), "reachable");
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

    #[test]
    fn one_keep_rule_for_every_session_and_its_reason_when_only_watched() {
        let facts = |told: bool, kept: bool| SessionFacts {
            row: SessionRow {
                told_ms: told.then_some(1),
                kept,
                ..SessionRow::default()
            },
            ..SessionFacts::default()
        };
        assert_eq!(kept(&facts(false, false), Keep::All), Ok(()));
        assert_eq!(kept(&facts(true, false), Keep::Agents), Ok(()));
        assert_eq!(kept(&facts(false, true), Keep::Agents), Ok(()));
        let why = kept(&facts(false, false), Keep::Agents).unwrap_err();
        assert!(why.contains("WAKEBRIDGE=keep"), "{why}");
    }

    #[test]
    fn a_message_unreported_for_two_minutes_and_not_held_is_unheard() {
        let sent = 1_000_000;
        let facts = |held: bool, heard: Option<i64>| SessionFacts {
            row: SessionRow {
                inbox: Some(crate::store::InboxRow {
                    sent_ms: Some(sent),
                    heard_ms: heard,
                    ..Default::default()
                }),
                ..SessionRow::default()
            },
            message_held: held,
            inbox: Ok(Some(crate::reading::inbox::Inbox {
                socket: "/run/cc-socks/1.sock".into(),
                token: None,
                pid: None,
                thread: None,
            })),
            ..SessionFacts::default()
        };
        let unheard = |f: &SessionFacts, at: i64| inbox_status(f, at).unwrap().unheard_since;
        assert_eq!(
            unheard(&facts(false, None), sent + 60_000),
            None,
            "a minute on"
        );
        let at = unheard(&facts(false, None), sent + 600_000);
        assert_eq!(at, clock::shown_ms(sent));
        assert_eq!(
            unheard(&facts(true, None), sent + 600_000),
            None,
            "held: a dialog"
        );
        assert_eq!(unheard(&facts(false, Some(sent + 5)), sent + 600_000), None);
    }

    #[test]
    fn a_session_nothing_reaches_shows_its_series_but_no_next_nudge() {
        let local = TimeZone::UTC;
        let now_ms = 1_800_000_000_000;
        let view = |state| {
            let mut session = Session::default();
            session.shown = (state, String::new());
            session.last_nudge_ms = Some(now_ms - 60_000);
            let rendered = Rendered {
                pane: None,
                next_nudge_at: Some(now_ms + 60_000),
                watched: None,
                now_ms,
                local: &local,
            };
            render("s", &session, rendered).nudge.unwrap()
        };
        assert_eq!(
            view(api::SessionState::Idle).next_nudge_at,
            clock::shown_ms(now_ms + 60_000)
        );
        for state in [api::SessionState::Ended, api::SessionState::NoPane] {
            let nudge = view(state);
            assert_eq!(nudge.next_nudge_at, None, "{state:?}");
            assert!(nudge.last_nudge_at.is_some(), "its series is still shown");
        }
    }
}
