//! `GET /changes?seen=TAG`: the page's long poll. A tag names what `/fleet` shows of this
//! machine (its sessions, their time left out); the answer comes at once when the tag is not
//! `seen`, else as soon as the session loop's views change it, else after [`LONGEST_WAIT`] with
//! the same tag. The page then reads `/fleet`: it follows the loop's own changes, not a clock.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::guards::require_reader;
use super::{ApiError, fleet, status};
use crate::http::AppState;
use crate::session::SessionViews;

/// Under the 30 s a proxy or browser might give up on a quiet request.
const LONGEST_WAIT: Duration = Duration::from_secs(25);
/// How often the ledger is looked at meanwhile: a hook writes it, not the loop, and the loop
/// reads it only at its next poll unless someone asks.
const LEDGER_LOOK: Duration = Duration::from_millis(500);

#[derive(Debug, Deserialize)]
pub struct Seen {
    seen: Option<String>,
}

pub async fn changes(
    State(app): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(Seen { seen }): Query<Seen>,
) -> Result<Json<Value>, ApiError> {
    require_reader(&app, &headers)?;
    let until = Instant::now() + LONGEST_WAIT;
    let mut views = app.views.clone();
    loop {
        views.mark_unchanged();
        let tag = tag_of(&app, &status::views(&app).await);
        let stopping = app.stopping.is_cancelled();
        if seen.as_deref() != Some(tag.as_str()) || Instant::now() >= until || stopping {
            return Ok(Json(json!({ "tag": tag })));
        }
        let next_look = until.min(Instant::now() + LEDGER_LOOK);
        tokio::select! {
            changed = tokio::time::timeout_at(next_look, views.changed()) => {
                // A loop that stopped (its sender gone) changes nothing more: wait out the look.
                if let Ok(Err(_)) = changed {
                    tokio::time::sleep_until(next_look).await;
                }
            }
            () = app.stopping.cancelled() => {}
        }
    }
}

/// A digest of this machine's status as `/fleet` shows it, minus the time it was made.
fn tag_of(app: &AppState, views: &SessionViews) -> String {
    let mut status = crate::fleet::status::of(&fleet::machine(app), views, &[]);
    status.at = jiff::Timestamp::UNIX_EPOCH;
    let mut hasher = std::hash::DefaultHasher::new();
    serde_json::to_string(&status)
        .unwrap_or_default()
        .hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}
