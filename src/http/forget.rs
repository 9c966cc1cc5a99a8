//! `POST /forget`: drops a session's ledger rows and, with `force`, its panes.json mapping. A
//! mapped session is refused (409) without `force`: its agent may still run and would write the
//! mapping back.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};

use super::ApiError;
use super::guards::{blocking, operator_request, session_id};
use crate::http::AppState;
use crate::wakedir::reader::mapped_panes;

/// The body, as a 400 shows it.
const SHAPE: &str = r#"{"session_id": "...", "force": false}"#;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ForgetRequest {
    session_id: String,
    /// Unmap it from panes.json too.
    #[serde(default)]
    force: bool,
}

pub async fn forget(
    State(app): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let request: ForgetRequest = operator_request(&app, &headers, body, SHAPE).await?;
    let sid = session_id(&request.session_id)?.to_string();
    let wake_dir = app.deliverer.spool().wake_dir().to_path_buf();
    // Refused before anything changes; the ledger is forgotten first and the mapping last, so a
    // ledger that fails leaves the session as it was, mapped and known.
    let (dir, check_sid) = (wake_dir.clone(), sid.clone());
    let read = move || mapped_panes(&dir).remove(&check_sid);
    let mapped = blocking("reading panes.json", read).await?;
    if let Some(target) = &mapped
        && !request.force
    {
        return Err(ApiError::Conflict(format!(
            "session {sid} is mapped to {target} in panes.json, so its agent may still run (its \
             next hook would bring it back); end the agent first, or pass force \
             (`wakebridge forget {sid} --force`) to unmap and forget it"
        )));
    }
    let known = app
        .deliverer
        .store()
        .forget_session(&sid)
        .await
        .map_err(|e| ApiError::ledger("forget a session", e))?;
    let unmapped = mapped.is_some();
    if unmapped {
        let unmap_sid = sid.clone();
        let unmap = move || crate::wakedir::clear_entry(&wake_dir, &unmap_sid, None);
        blocking("rewriting panes.json", unmap)
            .await?
            .map_err(|e| {
                tracing::warn!(error = %e, "could not unmap a session being forgotten");
                ApiError::Unavailable(format!(
                    "forgotten, but could not unmap {sid} from panes.json: {e}"
                ))
            })?;
    }
    if known == 0 && !unmapped {
        return Err(ApiError::Unknown(format!(
            "no session {sid} in the ledger or panes.json; `wakebridge status --all` lists them"
        )));
    }
    tracing::info!(
        session_id = sid.as_str(),
        unmapped,
        "forgot a session on an operator's request"
    );
    Ok(Json(
        json!({"session_id": sid, "status": "forgotten", "unmapped": unmapped}),
    ))
}
