//! `POST /rewind`: records a session's request for a clean context window (or, with `restart`, a
//! restart); the nudger performs it at the session's next idle moment.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};

use super::ApiError;
use super::guards::{blocking, operator_request, session_id};
use crate::clock;
use crate::http::AppState;
use crate::store::{Record, RewindWhy};
use crate::wakedir::target::PaneTarget;

/// The body, as a 400 shows it.
pub(super) const SHAPE: &str = r#"{"session_id": "...", "restart": false}"#;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RewindRequest {
    session_id: String,
    /// Start the agent again in its pane instead of `/clear`.
    #[serde(default)]
    restart: bool,
}

pub async fn rewind(
    State(app): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let request: RewindRequest = operator_request(&app, &headers, body, SHAPE).await?;
    asked_for(&app, request).await.map(Json)
}

/// Records the rewind `request` asks for: the route's work, for a person here or another
/// machine.
pub(super) async fn asked_for(
    app: &Arc<AppState>,
    request: RewindRequest,
) -> Result<Value, ApiError> {
    let asked = session_id(&request.session_id)?;
    if app.config.backend != crate::config::Backend::Mux {
        return Err(ApiError::Conflict(
            "rewinds are performed by the session loop, which runs only with the mux backend \
             (--backend mux)"
                .into(),
        ));
    }
    let why = match request.restart {
        true => RewindWhy::Restart,
        false => RewindWhy::Asked,
    };
    let (app, asked) = (app.clone(), asked.to_string());
    blocking("recording the rewind", move || ask(&app, &asked, why)).await?
}

/// Records the rewind for the id `asked` goes by now, unless one already waits.
fn ask(app: &AppState, asked: &str, why: RewindWhy) -> Result<Value, ApiError> {
    let deliverer = &app.deliverer;
    let resolved = deliverer.gate().resolve(asked);
    let sid = resolved.session_id.into_owned();
    if why == RewindWhy::Restart
        && let Some(PaneTarget::Zellij { .. }) = &resolved.target
    {
        return Err(ApiError::BadRequest(format!(
            "session {asked} runs in a zellij pane, and restarts are tmux only; ask for a rewind \
             (without restart) instead"
        )));
    }
    let store = deliverer.store();
    let unreadable = |e| ApiError::ledger("read or record a rewind", e);
    let row = store.session(&sid).map_err(unreadable)?;
    if let Some(why) = row.and_then(|row| row.agent.side().not_rewound()) {
        return Err(ApiError::BadRequest(format!("session {asked}: {why}")));
    }
    if resolved.target.is_none() {
        return Err(ApiError::BadRequest(format!(
            "session {asked} has no pane in panes.json, so there is nothing to rewind; map it \
             (its SessionStart hook, or `wakebridge panes set`) first"
        )));
    }
    let waiting = store.rewinds().map_err(unreadable)?.facts(&sid).pending;
    let status = if waiting.is_some() {
        "already-asked"
    } else {
        let record = Record::RewindAsked {
            session_id: sid.clone(),
            why,
            at_ms: clock::now_ms(),
        };
        store.record_blocking(record).map_err(unreadable)?;
        app.sessions.look_again();
        tracing::info!(
            session_id = sid.as_str(),
            why = why.as_str(),
            "rewind asked for; done at its next idle moment"
        );
        "asked"
    };
    Ok(json!({"session_id": sid, "status": status}))
}
