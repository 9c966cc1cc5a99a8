//! What every known session looks like right now, for machines (`GET /sessions`) and humans
//! (`wakebridge status`, which renders the same JSON: `cli::glance`). A session is known when
//! the ledger has seen it (hook or delivery) or panes.json maps it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use jiff::tz::TimeZone;

use crate::claude::limits::describe_reset;
use crate::http::AppState;
use crate::store::{Limit, RewindFacts, RewindOutcome, Rewinds, SessionRow, now_unix_ms};
use crate::wakedir::reader::mapped_panes;

/// Spools bigger than this are not read to count lines; the size alone is reported.
const COUNT_LINES_MAX_BYTES: u64 = 64 << 20;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SessionStatus {
    pub session_id: String,
    /// `{"mux","pane","session"?}` when panes.json maps the session.
    pub pane: Option<serde_json::Value>,
    /// `busy`, `idle`, `unmapped`.
    pub state: String,
    /// Why the state is what it is, in a few words.
    pub reason: String,
    pub cooldown_remaining_s: f64,
    pub last_wake_at: Option<String>,
    pub last_action: Option<String>,
    pub last_delivery_at: Option<String>,
    pub last_error_kind: Option<String>,
    pub last_hook_event: Option<String>,
    pub last_seen_at: Option<String>,
    pub cwd: Option<String>,
    pub transcript_path: Option<String>,
    pub spool_lines: Option<u64>,
    pub spool_bytes: u64,
    /// Filled by the context monitor when it runs.
    pub context: Option<serde_json::Value>,
    /// Filled by the idle nudger when it runs.
    pub nudge: Option<serde_json::Value>,
    /// `{"events", "since"}` while bus events wait for a wake (README: "How a message reaches a
    /// session").
    pub owed: Option<serde_json::Value>,
    /// How owed wakes were paid: `{"last_at", "last_how", "last_events", "by_hook",
    /// "by_typing"}` (`how` is `hook` or `typed`), once any was.
    pub paid: Option<serde_json::Value>,
    /// The usage limit the session is held at: `{"kind", "resets_at", "resets_text",
    /// "seen_how", "since", "tries", "gave_up", "shown"}` (`shown`: `resets 15:00, in 1h 12m`).
    pub limit: Option<serde_json::Value>,
    /// Its rewinds, once it has had one asked or an id before a `/clear`: `{"performed",
    /// "last_at", "last_why", "last_outcome", "waiting", "formerly", "shown"}` (`shown`:
    /// `rewound 2×, last 14:02`).
    #[serde(default)]
    pub rewind: Option<serde_json::Value>,
}

fn rfc3339_ms(ms: Option<i64>) -> Option<String> {
    let ms = u64::try_from(ms?).ok()?;
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    Some(humantime::format_rfc3339_seconds(at).to_string())
}

/// How much to find out about each spool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpoolDetail {
    /// Size and line count (reads each spool; for `/sessions` and `wakebridge status`).
    Lines,
    /// Size only (one `stat` per spool; for `/metrics`, which is scraped often and must not
    /// cost more as spools grow).
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

/// Every known session, sorted by id.
pub fn collect(app: &AppState, detail: SpoolDetail) -> Vec<SessionStatus> {
    let gate = app.deliverer.gate();
    let wake_dir = app.deliverer.spool().wake_dir();
    let mapped = mapped_panes(wake_dir);
    let nudges = app
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
    let now_ms = now_unix_ms();
    let local = TimeZone::system();
    rows.into_iter()
        .map(|(sid, row)| {
            let pane = mapped.get(&sid);
            let busy = gate.is_busy(&sid);
            // Rows left from before `[limits] enabled = false` hold nothing now.
            let limit = row
                .as_ref()
                .and_then(|r| r.limit.clone())
                .filter(|_| gate.limits_enabled());
            let (state, reason) = match (pane, busy, &limit) {
                (None, _, _) => ("unmapped", "no pane in panes.json; events are spooled only"),
                (Some(_), _, Some(l)) if l.gave_up => (
                    "limited",
                    "at its usage limit; resumes ran out, held until it shows life",
                ),
                (Some(_), _, Some(_)) => {
                    ("limited", "at its usage limit: held, resumed at the reset")
                }
                (Some(_), true, None) => ("busy", "fresh busy marker: a turn is running"),
                (Some(_), false, None) => ("idle", "no fresh busy marker"),
            };
            let (spool_lines, spool_bytes) = spool_depth(wake_dir, &sid, detail);
            let row = row.unwrap_or_else(|| SessionRow {
                session_id: sid.clone(),
                ..SessionRow::default()
            });
            SessionStatus {
                pane: pane.map(crate::wakedir::entry_json),
                state: state.into(),
                reason: reason.into(),
                cooldown_remaining_s: gate.cooldown().remaining(&sid).as_secs_f64(),
                last_wake_at: rfc3339_ms(row.last_wake_ms),
                last_action: row.last_action,
                last_delivery_at: rfc3339_ms(row.last_delivery_ms),
                last_error_kind: row.last_error_kind,
                last_hook_event: row.last_hook_event,
                last_seen_at: rfc3339_ms(row.last_seen_ms),
                cwd: row.cwd,
                transcript_path: row.transcript_path,
                spool_lines,
                spool_bytes,
                context: app.context.json(&sid),
                // The live nudger's view when it runs; else what the ledger last recorded.
                nudge: nudges
                    .get(&sid)
                    .and_then(|view| serde_json::to_value(view).ok())
                    .or_else(|| {
                        row.nudge.map(|n| {
                            serde_json::json!({
                                "unanswered": n.unanswered,
                                "last_nudge_at": rfc3339_ms(n.last_nudge_ms),
                                "acknowledged": n.acknowledged,
                            })
                        })
                    }),
                owed: row.owed.map(|o| {
                    serde_json::json!({"events": o.events, "since": rfc3339_ms(Some(o.since_ms))})
                }),
                paid: row.paid.map(|p| {
                    serde_json::json!({
                        "last_at": rfc3339_ms(Some(p.last_ms)),
                        "last_how": p.last_how.as_str(),
                        "last_events": p.last_events,
                        "by_hook": p.by_hook,
                        "by_typing": p.by_typing,
                    })
                }),
                limit: limit.map(|l| limit_json(&l, now_ms, &local)),
                rewind: rewind_json(&rewinds.facts(&sid), &local),
                session_id: sid,
            }
        })
        .collect()
}

fn limit_json(limit: &Limit, now_ms: i64, local: &TimeZone) -> serde_json::Value {
    serde_json::json!({
        "kind": limit.kind,
        "resets_at": rfc3339_ms(limit.resets_at_ms),
        "resets_text": limit.resets_text,
        "seen_how": limit.how.as_str(),
        "since": rfc3339_ms(Some(limit.since_ms)),
        "tries": limit.tries,
        "gave_up": limit.gave_up,
        "shown": describe_reset(limit.resets_at_ms, now_ms, local),
    })
}

fn rewind_json(facts: &RewindFacts, local: &TimeZone) -> Option<serde_json::Value> {
    if facts.pending.is_none() && facts.last.is_none() && facts.formerly.is_empty() {
        return None;
    }
    let last_at = facts.last.as_ref().and_then(|r| r.done_ms);
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
    Some(serde_json::json!({
        "performed": facts.performed,
        "last_at": rfc3339_ms(last_at),
        "last_why": facts.last.as_ref().map(|r| r.why.as_str()),
        "last_outcome": facts.last.as_ref().and_then(|r| r.outcome).map(RewindOutcome::as_str),
        "last_detail": facts.last.as_ref().and_then(|r| r.detail.clone()),
        "waiting": facts.pending.as_ref().map(|r| r.why.as_str()),
        "formerly": facts.formerly,
        "shown": shown,
    }))
}
