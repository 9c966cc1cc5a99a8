//! `GET /sessions` (every known session) and `GET /metrics` (telemetry's counters and the gauges
//! computed at scrape time, none per session).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use strum::IntoEnumIterator;

use super::ApiError;
use super::guards::require_reader;
use crate::agent::Agent;
use crate::api::{Budget, SessionState, SessionStatus, Sessions};
use crate::budget::WindowKind;
use crate::http::AppState;
use crate::http::status::{self, SpoolDetail};
use crate::store::RewindOutcome;
use crate::telemetry::Exposition;

/// The loop's views, fresh, with each spool's depth read off the request threads.
async fn snapshot(
    app: Arc<AppState>,
    detail: SpoolDetail,
) -> Result<(Vec<SessionStatus>, Option<crate::store::Pause>), ApiError> {
    let views = status::views(&app).await;
    let paused = views.paused_all;
    let filled = move || status::filled(&app, &views, detail);
    let sessions = super::guards::blocking("status collection", filled).await?;
    Ok((sessions, paused))
}

pub async fn sessions(
    State(app): State<Arc<AppState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    require_reader(&app, &headers)?;
    let shared = app.clone();
    let (budgets, today) = super::guards::blocking("budget reading", move || {
        let today = shared.deliverer.store().today(local_midnight_ms());
        (budgets(&shared), today.ok())
    })
    .await?;
    let (sessions, paused) = snapshot(app, SpoolDetail::Lines).await?;
    Ok(Json(Sessions {
        sessions,
        budgets,
        today,
        paused: paused.and_then(crate::session::view::pause_status),
    })
    .into_response())
}

/// The start of today in the daemon's zone, unix ms.
fn local_midnight_ms() -> i64 {
    let midnight = jiff::ZonedDateTime::now().start_of_day();
    midnight.map_or(0, |at| at.timestamp().as_millisecond())
}

/// The accounts' usage windows: a few small files (call it off the async workers).
pub(crate) fn budgets(app: &AppState) -> Vec<Budget> {
    let stale = crate::clock::duration_ms(app.config.settings.budget.stale_after);
    crate::budget::shown(&app.config.paths.state_dir, stale, crate::clock::now_ms())
}

pub async fn metrics(
    State(app): State<Arc<AppState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    require_reader(&app, &headers)?;
    let store = app.deliverer.store().clone();
    let registered = app
        .registration
        .as_ref()
        .is_some_and(|r| r.snapshot().registered);
    let started_at = app.started_at;
    let thresholds = app.config.settings.context.thresholds.clone();
    let shared = app.clone();
    let (rewinds, caused, budgets) = super::guards::blocking("ledger reading", move || {
        let (rewinds, caused) = (store.rewind_counts(), store.caused_totals());
        (
            rewinds.unwrap_or_default(),
            caused.unwrap_or_default(),
            budgets(&shared),
        )
    })
    .await?;
    let (sessions, _) = snapshot(app, SpoolDetail::Bytes).await?;
    let mut text = String::new();
    let mut out = Exposition(&mut text);
    crate::telemetry::render(&mut out);
    out.labelled(
        "wakebridge_build_info",
        "gauge",
        "Always 1; the version in its label.",
        "version",
        [(env!("CARGO_PKG_VERSION"), 1)],
    );
    let started = u64::try_from(crate::clock::ms(started_at) / 1000).unwrap_or(0);
    out.gauge(
        "wakebridge_start_time_seconds",
        "When this daemon started, in Unix seconds.",
        started,
    );
    out.gauge(
        "wakebridge_bus_registered",
        "1 while the last check found our webhook row on the bus (0 also with registration off).",
        u64::from(registered),
    );
    let count = |keep: &dyn Fn(&SessionStatus) -> bool| sessions.iter().filter(|s| keep(s)).count();
    out.labelled(
        "wakebridge_sessions",
        "gauge",
        "Known sessions by state.",
        "state",
        SessionState::iter().map(|state| (state.as_str(), count(&|s| s.state == state) as u64)),
    );
    let agents = <Agent as strum::VariantNames>::VARIANTS.iter();
    out.labelled(
        "wakebridge_sessions_by_agent",
        "gauge",
        "Known sessions by the agent they run.",
        "agent",
        agents.map(|agent| (*agent, count(&|s| s.agent.as_str() == *agent) as u64)),
    );
    out.gauge(
        "wakebridge_spool_bytes",
        "Bytes in all spool files.",
        sessions.iter().map(|s| s.spool_bytes).sum(),
    );
    out.one(
        "wakebridge_log_lines_dropped_total",
        "counter",
        "Log lines dropped because stderr's reader did not keep up.",
        crate::telemetry::logging::dropped_lines(),
    );
    out.gauge(
        "wakebridge_sessions_acknowledged_idle",
        "Sessions the nudger has fallen silent for.",
        count(&|s| s.nudge.as_ref().is_some_and(|n| n.acknowledged)) as u64,
    );
    let owed: Vec<u64> = (sessions.iter())
        .filter_map(|s| Some(s.owed.as_ref()?.events))
        .collect();
    out.gauge(
        "wakebridge_owed_sessions",
        "Sessions with bus events waiting for a wake.",
        owed.len() as u64,
    );
    out.gauge(
        "wakebridge_owed_events",
        "Bus events waiting for a wake.",
        owed.iter().sum(),
    );
    let paid = sessions.iter().filter_map(|s| s.paid.as_ref());
    out.labelled(
        "wakebridge_owed_wakes_paid_total",
        "counter",
        "Owed wakes paid, by how: the Stop hook, typing or the inbox.",
        "how",
        [
            ("hook", paid.clone().map(|p| p.by_hook).sum::<u64>()),
            ("typed", paid.clone().map(|p| p.by_typing).sum::<u64>()),
            ("inbox", paid.map(|p| p.by_inbox).sum::<u64>()),
        ],
    );
    out.gauge(
        "wakebridge_limited_sessions",
        "Sessions held at a usage limit until it resets.",
        count(&|s| s.limit.is_some()) as u64,
    );
    out.labelled(
        "wakebridge_rewinds_total",
        "counter",
        "Rewinds (a /clear and the re-hydration prompt) by how they ended.",
        "outcome",
        <RewindOutcome as strum::IntoEnumIterator>::iter()
            .map(|o| (o.as_str(), rewinds.get(&Some(o)).copied().unwrap_or(0))),
    );
    out.gauge(
        "wakebridge_rewinds_waiting",
        "Rewinds asked for and not performed yet.",
        rewinds.get(&None).copied().unwrap_or(0),
    );
    out.labelled(
        "wakebridge_caused_tokens_total",
        "counter",
        "Tokens of the turns wakebridge's own texts started (input, cache read and creation, \
         output), by the kind of text.",
        "kind",
        caused
            .iter()
            .map(|(kind, tokens)| (<&str>::from(*kind), *tokens)),
    );
    // A path is no label value: with several accounts, each window's largest share is the one
    // to watch.
    let used = |kind: WindowKind| {
        let windows = budgets.iter().filter_map(|b| match kind {
            WindowKind::FiveHour => b.five_hour.as_ref(),
            WindowKind::SevenDay => b.seven_day.as_ref(),
        });
        let most = windows.map(|w| w.used_percentage).reduce(f64::max)?;
        Some((<&str>::from(kind), (most / 100.0).clamp(0.0, 1.0)))
    };
    out.labelled(
        "wakebridge_budget_used_ratio",
        "gauge",
        "The share of each usage window used (0..1), the largest among the accounts; absent \
         until a status line reported it, and after its reset.",
        "window",
        WindowKind::ALL.into_iter().filter_map(used),
    );
    // Per-session percentages would be a label per session id, a set without bound: the
    // fleet's fullest window and how many sessions are past each warning say what to act on.
    let percents: Vec<f64> = (sessions.iter())
        .filter_map(|s| s.context.as_ref()?.percent)
        .collect();
    out.one(
        "wakebridge_context_percent_max",
        "gauge",
        "The fullest context window among the sessions, in percent.",
        percents.iter().copied().fold(0.0, f64::max),
    );
    let (wrap_up, checkpoint) = (thresholds.wrap_up.percent, thresholds.checkpoint.percent);
    let past =
        |from: f64, below: f64| percents.iter().filter(|&&p| p >= from && p < below).count() as u64;
    out.labelled(
        "wakebridge_context_sessions",
        "gauge",
        "Sessions with context figures, by the highest warning level their window is past.",
        "level",
        [
            ("below", past(f64::MIN, wrap_up)),
            ("wrap-up", past(wrap_up, checkpoint)),
            ("checkpoint", past(checkpoint, f64::MAX)),
        ],
    );
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response())
}
