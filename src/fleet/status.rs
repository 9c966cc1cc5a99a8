//! A machine's compact status as it goes on the bus: made from the session loop's views (no
//! paths, payloads, prompts or tokens: a session's id, the last part of its directory, its
//! state, context share, owed count, limit reset, pause and next nudge), sealed with the fleet
//! key on the bus.

use crate::api::{self, FleetBudget, FleetSession, MachineStatus, SessionState};
use crate::session::SessionViews;
use crate::wire::signature::Secret;

pub fn of(machine: &str, views: &SessionViews, budgets: &[api::Budget]) -> MachineStatus {
    let sessions = (views.sessions.values())
        .filter(|s| s.state != SessionState::Ended)
        .map(|s| FleetSession {
            id: s.session_id.clone(),
            project: s.cwd.as_deref().and_then(last_part),
            agent: s.agent.as_str().to_owned(),
            state: s.state,
            context: s.context.as_ref().and_then(|c| c.percent),
            owed: s.owed.as_ref().map(|o| o.events),
            limit_reset: s.limit.as_ref().and_then(|l| l.resets_at),
            paused: s.pause.clone(),
            next_nudge: s.nudge.as_ref().and_then(|n| n.next_nudge_at),
            rewinds: (s.rewind.as_ref().map(|r| r.performed)).filter(|&n| n > 0),
            unheard_since: s.inbox.as_ref().and_then(|i| i.unheard_since),
        })
        .collect();
    let budgets = (budgets.iter())
        .map(|b| FleetBudget {
            account: last_part(&b.account).unwrap_or_else(|| "account".to_owned()),
            five_hour: b.five_hour.as_ref().map(|w| w.used_percentage),
            five_hour_resets: b.five_hour.as_ref().and_then(|w| w.resets_at),
            seven_day: b.seven_day.as_ref().map(|w| w.used_percentage),
            seven_day_resets: b.seven_day.as_ref().and_then(|w| w.resets_at),
        })
        .collect();
    MachineStatus {
        machine: machine.to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        at: jiff::Timestamp::now(),
        sessions,
        budgets,
    }
}

pub(crate) fn last_part(path: &str) -> Option<String> {
    let name = std::path::Path::new(path).file_name()?.to_string_lossy();
    Some(name.into_owned())
}

/// Whether two statuses say the same but for when they were made.
pub fn same(a: &MachineStatus, b: &MachineStatus) -> bool {
    a.machine == b.machine
        && a.version == b.version
        && a.sessions == b.sessions
        && a.budgets == b.budgets
}

/// The status a payload carries, when its signature is the fleet key's and it says it is from
/// `machine` (the channel it came on).
pub fn verified(payload: &str, key: &Secret, machine: &str) -> Option<MachineStatus> {
    let status: MachineStatus = super::seal::open(super::STATUS_EVENT, payload, key).ok()?;
    (status.machine == machine).then_some(status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn views(sessions: &[(&str, SessionState, Option<&str>)]) -> SessionViews {
        let map: BTreeMap<String, api::SessionStatus> = (sessions.iter())
            .map(|(id, state, cwd)| {
                let mut s: api::SessionStatus = serde_json::from_value(serde_json::json!({
                    "session_id": id, "pane": null, "state": state, "reason": "",
                    "cooldown_remaining_s": 0.0, "last_wake_at": null, "last_action": null,
                    "last_delivery_at": null, "last_error_kind": null,
                    "last_hook_event": null, "last_seen_at": null, "cwd": cwd,
                    "transcript_path": "/home/me/.claude/projects/x/secret-prompt.jsonl",
                    "spool_lines": 0, "spool_bytes": 0, "context": null, "nudge": null,
                    "owed": null, "paid": null, "limit": null, "rewind": null,
                }))
                .expect("a session view");
                s.state = *state;
                ((*id).to_owned(), s)
            })
            .collect();
        SessionViews {
            version: None,
            sessions: Arc::new(map),
            paused_all: None,
        }
    }

    #[test]
    fn a_status_names_projects_not_paths_and_leaves_ended_sessions_out() {
        let views = views(&[
            ("a", SessionState::Idle, Some("/home/me/work/parser")),
            ("b", SessionState::Ended, Some("/home/me/work/old")),
        ]);
        let status = of("box", &views, &[]);
        assert_eq!(status.sessions.len(), 1);
        assert_eq!(status.sessions[0].project.as_deref(), Some("parser"));
        let json = serde_json::to_string(&status).unwrap();
        assert!(!json.contains("/home"), "{json}");
        assert!(!json.contains("secret-prompt"), "{json}");
    }

    #[test]
    fn fifty_sessions_fit_in_eight_kilobytes() {
        let ids: Vec<String> = (0..50)
            .map(|i| format!("0b7a3c1e-5d2f-4e8a-9c6b-{i:012}"))
            .collect();
        let sessions: Vec<_> = (ids.iter())
            .map(|id| {
                (
                    id.as_str(),
                    SessionState::Working,
                    Some("/srv/src/wakebridge"),
                )
            })
            .collect();
        let status = of("build-box", &views(&sessions), &[]);
        let payload =
            super::super::seal::seal(super::super::STATUS_EVENT, &status, &Secret::new("k"));
        assert!(payload.len() < 8 * 1024, "{} bytes", payload.len());
    }

    #[test]
    fn only_the_fleet_key_and_the_channel_s_machine_verify() {
        let key = Secret::new("fleet key");
        let status = of("alpha", &views(&[("a", SessionState::Idle, None)]), &[]);
        let payload = super::super::seal::seal(super::super::STATUS_EVENT, &status, &key);
        assert_eq!(verified(&payload, &key, "alpha"), Some(status.clone()));
        assert_eq!(verified(&payload, &Secret::new("other"), "alpha"), None);
        assert_eq!(verified(&payload, &key, "beta"), None, "named for another");
        let body = payload.split_once('\n').unwrap().1;
        assert_eq!(verified(body, &key, "alpha"), None, "unsigned");
        let tampered = payload.replace("\"idle\"", "\"working\"");
        assert_eq!(
            verified(&tampered, &key, "alpha"),
            None,
            "changed after signing"
        );
    }
}
