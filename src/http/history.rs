//! The page's history. [`spawn_sampler`] records, every `[page] sample_interval`, each live
//! session's context share and each account's window use from the loop's views (what `/fleet`
//! shows, no more: a session's id, an account's last path part); `GET /history?hours=N` serves
//! the last `N` hours of them (24 by default, up to `[page] history`), with wakebridge's own
//! texts per hour and the tokens their turns caused.

use std::collections::BTreeMap;
use std::sync::Arc;

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

#[derive(Debug, Deserialize)]
pub struct Span {
    hours: Option<u32>,
}

pub async fn history(
    State(app): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(Span { hours }): Query<Span>,
) -> Result<Json<History>, ApiError> {
    require_reader(&app, &headers)?;
    let kept = clock::duration_ms(app.config.settings.page.history);
    let hours = i64::from(hours.unwrap_or(DEFAULT_HOURS).max(1));
    let to = clock::now_ms();
    let from = to - (hours * 3_600_000).min(kept);
    let shared = app.clone();
    let read = move || {
        let store = shared.deliverer.store();
        Ok::<_, crate::store::StoreError>((store.samples_since(from)?, store.texts_by_hour(from)?))
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

/// Samples grouped into one series per kind and key, each oldest first (as read).
fn series_of(samples: Vec<Sample>) -> Vec<HistorySeries> {
    let mut series: BTreeMap<(HistoryKind, String), Vec<(i64, f64)>> = BTreeMap::new();
    for sample in samples {
        let points = series.entry((sample.kind, sample.key)).or_default();
        points.push((sample.at_ms / 1000, sample.value));
    }
    (series.into_iter())
        .map(|((kind, key), points)| HistorySeries { kind, key, points })
        .collect()
}

/// Samples every `[page] sample_interval` until `shutdown`, at instants aligned to it.
pub fn spawn_sampler(app: &Arc<AppState>, shutdown: CancellationToken) -> JoinHandle<()> {
    let app = app.clone();
    let every = app.config.settings.page.sample_interval;
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        while shutdown.run_until_cancelled(tick.tick()).await.is_some() {
            let step = clock::duration_ms(every).max(1);
            let at_ms = clock::now_ms() / step * step;
            let samples = take(&app, at_ms).await;
            if samples.is_empty() {
                continue;
            }
            if let Err(e) = app.deliverer.store().record_samples(samples).await {
                tracing::warn!(error = %e, "could not record the page's history in the ledger");
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
