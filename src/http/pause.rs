//! `POST /pause` and `POST /unpause`: a person's switch for some sessions or all of them. A
//! paused session gets nothing from wakebridge until it is unpaused or its time runs out; its bus
//! events are spooled and owed meanwhile, and an unpause has the session loop pay them at once.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};

use super::ApiError;
use super::guards::{operator_request, session_id};
use crate::clock;
use crate::http::AppState;
use crate::store::{ALL_SESSIONS, Record};

/// The bodies, as a 400 shows them.
pub(super) const PAUSE_SHAPE: &str = r#"{"session_ids": ["..."] or "all": true, "for_s": 3600}"#;
pub(super) const UNPAUSE_SHAPE: &str = r#"{"session_ids": ["..."] or "all": true}"#;
/// The shortest and longest pause with an end: longer ones are meant to be lifted by hand.
const SHORTEST: Duration = Duration::from_secs(1);
const LONGEST: Duration = Duration::from_secs(30 * 24 * 3600);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Request {
    #[serde(default)]
    session_ids: Vec<String>,
    #[serde(default)]
    all: bool,
    /// Seconds until the pause lifts by itself (`/pause` only).
    #[serde(default)]
    for_s: Option<f64>,
}

impl Request {
    /// The ids the request names, or [`ALL_SESSIONS`]: exactly one of the two.
    fn targets(&self) -> Result<Vec<String>, ApiError> {
        match (self.all, self.session_ids.is_empty()) {
            (true, true) => Ok(vec![ALL_SESSIONS.to_owned()]),
            (false, false) => (self.session_ids.iter())
                .map(|id| Ok(session_id(id)?.as_str().to_owned()))
                .collect(),
            _ => Err(ApiError::BadRequest(
                "name the sessions (session_ids) or all of them (all: true), one of the two".into(),
            )),
        }
    }
}

pub async fn pause(
    State(app): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let request: Request = operator_request(&app, &headers, body, PAUSE_SHAPE).await?;
    paused(&app, request).await.map(Json)
}

/// Pauses what `request` names: the route's work, for a person here or another machine.
pub(super) async fn paused(app: &AppState, request: Request) -> Result<Value, ApiError> {
    let targets = request.targets()?;
    let refused = "for_s (`pause --for`) must be from 1 s to 30 days; leave it out to pause \
                   until unpaused";
    let for_ = (request.for_s.map(Duration::try_from_secs_f64))
        .map(|d| d.ok().filter(|d| (SHORTEST..=LONGEST).contains(d)))
        .map(|d| d.ok_or_else(|| ApiError::BadRequest(refused.into())))
        .transpose()?;
    let since_ms = clock::now_ms();
    let until_ms = for_.map(|d| since_ms.saturating_add(clock::duration_ms(d)));
    let records = (targets.iter())
        .map(|id| Record::Paused {
            session_id: id.clone(),
            since_ms,
            until_ms,
        })
        .collect();
    record(app, records).await?;
    tracing::info!(sessions = ?targets, ?for_, "paused on a person's request");
    let until = until_ms.and_then(clock::shown_ms);
    Ok(json!({"status": "paused", "session_ids": targets, "until": until}))
}

pub async fn unpause(
    State(app): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let request: Request = operator_request(&app, &headers, body, UNPAUSE_SHAPE).await?;
    unpaused(&app, request).await.map(Json)
}

/// Lifts what `request` names: the route's work, for a person here or another machine.
pub(super) async fn unpaused(app: &AppState, request: Request) -> Result<Value, ApiError> {
    if request.for_s.is_some() {
        return Err(ApiError::BadRequest(format!(
            "expected {UNPAUSE_SHAPE}: an unpause has no for_s"
        )));
    }
    let targets = request.targets()?;
    // A named id under no pause of its own is said back, so a slip in a name does not read as
    // done (a pause of every session is not its own: `all_still_paused` tells of that).
    let paused = |id: &str| app.deliverer.store().pause(id).ok().flatten();
    let not_paused: Vec<&String> = (targets.iter())
        .filter(|id| *id != ALL_SESSIONS && paused(id).is_none_or(|pause| pause.all))
        .collect();
    let records = (targets.iter())
        .map(|id| Record::Unpaused {
            session_id: id.clone(),
        })
        .collect();
    record(app, records).await?;
    // What waited is owed: the session loop looks now rather than at its next poll.
    app.sessions.look_again();
    tracing::info!(sessions = ?targets, "unpaused on a person's request");
    // Unpausing one session leaves a pause of every session standing: say so.
    let all_paused = paused(ALL_SESSIONS).is_some();
    Ok(json!({
        "status": "unpaused",
        "session_ids": targets,
        "not_paused": not_paused,
        "all_still_paused": all_paused,
    }))
}

async fn record(app: &AppState, records: Vec<Record>) -> Result<(), ApiError> {
    app.deliverer
        .store()
        .record_all(records)
        .await
        .map_err(|e| ApiError::ledger("record a pause", e))
}
