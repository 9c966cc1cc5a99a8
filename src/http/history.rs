//! The page's history. [`spawn_sampler`] records, every `[page] sample_interval`, each live
//! session's context share and each account's window use from the loop's views (what `/fleet`
//! shows, no more: a session's id, an account's last path part); `GET /history?hours=N` serves
//! the last `N` hours of them (24 by default, up to `[page] history`), with wakebridge's own
//! texts per hour and the tokens their turns caused.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use serde::Deserialize;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::guards::{blocking, require_reader};
use super::{ApiError, sessions, status};
use crate::api::{History, HistoryKind, HistorySeries, SessionState, TextsInHour};
use crate::clock;
use crate::fleet::status::last_part;
use crate::http::AppState;
use crate::store::Sample;

const DEFAULT_HOURS: u32 = 24;
/// Points a line at most: a chart is a few hundred pixels wide.
const MOST_POINTS: i64 = 720;

/// Read as text, so that a bad `hours` gets this daemon's error body, not the extractor's.
#[derive(Debug, Deserialize)]
pub struct Span {
    hours: Option<String>,
}

pub async fn history(
    State(app): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(Span { hours }): Query<Span>,
) -> Result<Json<History>, ApiError> {
    require_reader(&app, &headers)?;
    let kept = clock::duration_ms(app.config.settings.page.history);
    let hours: u32 = match hours {
        None => DEFAULT_HOURS,
        Some(hours) => hours.parse().map_err(|_| {
            ApiError::BadRequest(format!(
                "hours must be a whole number of hours, like 24 or 168, not {hours:?}"
            ))
        })?,
    };
    let hours = i64::from(hours.max(1));
    let to = clock::now_ms();
    let from = to - (hours * 3_600_000).min(kept);
    let sampled = clock::duration_ms(app.config.settings.page.sample_interval).max(1);
    // A whole number of sample intervals, the fewest that keep a line within MOST_POINTS.
    let intervals = ((to - from) / MOST_POINTS + sampled - 1) / sampled;
    let bucket = intervals.max(1) * sampled;
    let shared = app.clone();
    let read = move || {
        let store = shared.deliverer.store();
        let samples = store.samples_since(from, bucket)?;
        Ok::<_, crate::store::StoreError>((samples, store.texts_by_hour(from)?))
    };
    let (samples, hours) = blocking("history reading", read)
        .await?
        .map_err(|e| ApiError::ledger("read the history", e))?;
    Ok(Json(History {
        from: from / 1000,
        to: to / 1000,
        series: series_of(samples),
        texts: (hours.into_iter())
            .map(|h| TextsInHour {
                hour: h.hour_ms / 1000,
                kind: h.kind,
                texts: h.texts,
                tokens: h.tokens,
            })
            .collect(),
    }))
}

/// Samples grouped into one series per kind and key, each oldest first (as read), to a tenth of
/// a percent.
fn series_of(samples: Vec<Sample>) -> Vec<HistorySeries> {
    let mut series: BTreeMap<(HistoryKind, String), Vec<(i64, f64)>> = BTreeMap::new();
    for sample in samples {
        let points = series.entry((sample.kind, sample.key)).or_default();
        points.push((sample.at_ms / 1000, (sample.value * 10.0).round() / 10.0));
    }
    (series.into_iter())
        .map(|((kind, key), points)| HistorySeries { kind, key, points })
        .collect()
}

/// Samples at every multiple of `[page] sample_interval` on the wall clock until `shutdown`:
/// one sample an interval, each at the instant it names.
pub fn spawn_sampler(app: &Arc<AppState>, shutdown: CancellationToken) -> JoinHandle<()> {
    let app = app.clone();
    let step = clock::duration_ms(app.config.settings.page.sample_interval).max(1);
    tokio::spawn(async move {
        let warned = crate::telemetry::warn::Warnings::default();
        loop {
            let at_ms = (clock::now_ms() / step + 1) * step;
            let wait = Duration::from_millis((at_ms - clock::now_ms()).max(0) as u64);
            if shutdown
                .run_until_cancelled(tokio::time::sleep(wait))
                .await
                .is_none()
            {
                return;
            }
            let samples = take(&app, at_ms).await;
            if samples.is_empty() {
                continue;
            }
            if let Err(e) = app.deliverer.store().record_samples(samples).await {
                crate::warn_limited!(warned, "record", error = %e,
                    "could not record the page's history in the ledger: {e}");
            }
        }
    })
}

/// This instant's readings: the context of each session not ended, each account's windows.
async fn take(app: &Arc<AppState>, at_ms: i64) -> Vec<Sample> {
    let views = status::views(app).await;
    let sample = |kind, key: &str, value| Sample {
        at_ms,
        kind,
        key: key.to_owned(),
        value,
    };
    let mut samples: Vec<Sample> = (views.sessions.values())
        .filter(|s| s.state != SessionState::Ended)
        .filter_map(|s| {
            let percent = s.context.as_ref()?.percent?;
            Some(sample(HistoryKind::Context, &s.session_id, percent))
        })
        .collect();
    let shared = app.clone();
    let budgets = blocking("budget reading", move || sessions::budgets(&shared)).await;
    for budget in budgets.unwrap_or_default() {
        let account = last_part(&budget.account).unwrap_or_else(|| "account".to_owned());
        let windows = [
            (HistoryKind::FiveHour, budget.five_hour),
            (HistoryKind::SevenDay, budget.seven_day),
        ];
        for (kind, window) in windows {
            if let Some(window) = window {
                samples.push(sample(kind, &account, window.used_percentage));
            }
        }
    }
    samples
}
