//! `GET /sessions` (every known session as JSON) and `GET /metrics` (Prometheus text).

use std::fmt::Write as _;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::ApiError;
use crate::http::AppState;
use crate::http::status::{self, SessionStatus, SpoolDetail};
use crate::store::RewindOutcome;

async fn snapshot(app: Arc<AppState>, detail: SpoolDetail) -> Result<Vec<SessionStatus>, ApiError> {
    // Reads panes.json, markers, spools and the ledger: keep it off the request threads.
    tokio::task::spawn_blocking(move || status::collect(&app, detail))
        .await
        .map_err(|_| ApiError::Unavailable("status collection failed".into()))
}

pub async fn sessions(State(app): State<Arc<AppState>>) -> Result<Response, ApiError> {
    let sessions = snapshot(app, SpoolDetail::Lines).await?;
    Ok(Json(json!({ "sessions": sessions })).into_response())
}

pub async fn metrics(State(app): State<Arc<AppState>>) -> Result<Response, ApiError> {
    let store = app.deliverer.store().clone();
    let sessions = snapshot(app, SpoolDetail::Bytes).await?;
    let mut text = crate::telemetry::handle().render();
    let mut by_state = std::collections::BTreeMap::<&str, u64>::new();
    for s in &sessions {
        *by_state.entry(s.state.as_str()).or_default() += 1;
    }
    let _ = writeln!(text, "# HELP wakebridge_sessions Known sessions by state.");
    let _ = writeln!(text, "# TYPE wakebridge_sessions gauge");
    for state in ["idle", "busy", "unmapped"] {
        let _ = writeln!(
            text,
            "wakebridge_sessions{{state=\"{state}\"}} {}",
            by_state.get(state).copied().unwrap_or(0)
        );
    }
    let spool_bytes: u64 = sessions.iter().map(|s| s.spool_bytes).sum();
    let _ = writeln!(
        text,
        "# HELP wakebridge_spool_bytes Bytes in all spool files."
    );
    let _ = writeln!(text, "# TYPE wakebridge_spool_bytes gauge");
    let _ = writeln!(text, "wakebridge_spool_bytes {spool_bytes}");
    let _ = writeln!(
        text,
        "# HELP wakebridge_log_lines_dropped_total Log lines dropped because stderr's reader did not keep up."
    );
    let _ = writeln!(text, "# TYPE wakebridge_log_lines_dropped_total counter");
    let _ = writeln!(
        text,
        "wakebridge_log_lines_dropped_total {}",
        crate::telemetry::logging::dropped_lines()
    );
    let acknowledged = sessions
        .iter()
        .filter(|s| s.nudge.as_ref().is_some_and(|n| n["acknowledged"] == true))
        .count();
    let _ = writeln!(
        text,
        "# HELP wakebridge_sessions_acknowledged_idle Sessions the nudger has fallen silent for."
    );
    let _ = writeln!(text, "# TYPE wakebridge_sessions_acknowledged_idle gauge");
    let _ = writeln!(text, "wakebridge_sessions_acknowledged_idle {acknowledged}");
    let owed: Vec<u64> = sessions
        .iter()
        .filter_map(|s| s.owed.as_ref()?["events"].as_u64())
        .collect();
    let _ = writeln!(
        text,
        "# HELP wakebridge_owed_sessions Sessions with bus events waiting for a wake."
    );
    let _ = writeln!(text, "# TYPE wakebridge_owed_sessions gauge");
    let _ = writeln!(text, "wakebridge_owed_sessions {}", owed.len());
    let _ = writeln!(
        text,
        "# HELP wakebridge_owed_events Bus events waiting for a wake."
    );
    let _ = writeln!(text, "# TYPE wakebridge_owed_events gauge");
    let _ = writeln!(text, "wakebridge_owed_events {}", owed.iter().sum::<u64>());
    let paid = |key: &str| -> u64 {
        sessions
            .iter()
            .filter_map(|s| s.paid.as_ref()?[key].as_u64())
            .sum()
    };
    let _ = writeln!(
        text,
        "# HELP wakebridge_owed_wakes_paid_total Owed wakes paid, by how: the Stop hook or typing."
    );
    let _ = writeln!(text, "# TYPE wakebridge_owed_wakes_paid_total counter");
    for (how, key) in [("hook", "by_hook"), ("typed", "by_typing")] {
        let _ = writeln!(
            text,
            "wakebridge_owed_wakes_paid_total{{how=\"{how}\"}} {}",
            paid(key)
        );
    }
    let limited = sessions.iter().filter(|s| s.limit.is_some()).count();
    let _ = writeln!(
        text,
        "# HELP wakebridge_limited_sessions Sessions held at a usage limit until it resets."
    );
    let _ = writeln!(text, "# TYPE wakebridge_limited_sessions gauge");
    let _ = writeln!(text, "wakebridge_limited_sessions {limited}");
    let rewinds = tokio::task::spawn_blocking(move || store.rewind_counts())
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let _ = writeln!(
        text,
        "# HELP wakebridge_rewinds_total Rewinds (a /clear and the re-hydration prompt) by how they ended."
    );
    let _ = writeln!(text, "# TYPE wakebridge_rewinds_total counter");
    for outcome in RewindOutcome::ALL {
        let _ = writeln!(
            text,
            "wakebridge_rewinds_total{{outcome=\"{}\"}} {}",
            outcome.as_str(),
            rewinds.get(&Some(outcome)).copied().unwrap_or(0)
        );
    }
    let waiting = rewinds.get(&None).copied().unwrap_or(0);
    let _ = writeln!(
        text,
        "# HELP wakebridge_rewinds_waiting Rewinds asked for and not performed yet."
    );
    let _ = writeln!(text, "# TYPE wakebridge_rewinds_waiting gauge");
    let _ = writeln!(text, "wakebridge_rewinds_waiting {waiting}");
    let contexts: Vec<(&str, f64)> = sessions
        .iter()
        .filter_map(|s| {
            Some((
                s.session_id.as_str(),
                s.context.as_ref()?["percent"].as_f64()?,
            ))
        })
        .collect();
    if !contexts.is_empty() {
        let _ = writeln!(
            text,
            "# HELP wakebridge_context_percent Context window used, per session."
        );
        let _ = writeln!(text, "# TYPE wakebridge_context_percent gauge");
        for (sid, pct) in contexts {
            let _ = writeln!(
                text,
                "wakebridge_context_percent{{session_id=\"{sid}\"}} {pct}"
            );
        }
    }
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response())
}
