//! `POST /wake`: a manual wake through the same gate as a bus event (`force` skips the busy marker
//! and the cooldown). It types the wake prompt or a configured message by name, never request text.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;

use super::ApiError;
use super::guards::{operator_request, session_id};
use super::hook::delivered_json;
use crate::delivery::Delivered;
use crate::http::AppState;
use crate::mux::KeystrokeText;
use crate::session::gate::Mode;

/// The body, as a 400 shows it.
pub(super) const SHAPE: &str = r#"{"session_id": "...", "force": false, "message": "<name>"}"#;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WakeRequest {
    session_id: String,
    #[serde(default)]
    force: bool,
    /// A configured message's name (`[wake.messages]`); absent means the wake prompt.
    #[serde(default)]
    message: Option<String>,
}

pub async fn wake(
    State(app): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let request: WakeRequest = operator_request(&app, &headers, body, SHAPE).await?;
    Ok(delivered_json(&woken(&app, request).await?))
}

/// Wakes the session `request` names: the route's work, for a person here or another machine.
pub(super) async fn woken(app: &AppState, request: WakeRequest) -> Result<Delivered, ApiError> {
    let session_id = session_id(&request.session_id)?;
    let text = match &request.message {
        None => KeystrokeText::wake_prompt(),
        Some(name) => {
            let messages = &app.config.settings.wake.messages;
            let configured = messages.get(name).ok_or_else(|| {
                let names: Vec<&str> = messages.keys().map(String::as_str).collect();
                ApiError::BadRequest(format!(
                    "unknown message {name:?}; configured messages: {}",
                    names.join(", ")
                ))
            })?;
            KeystrokeText::new(configured).map_err(|e| {
                ApiError::BadRequest(format!("configured message {name:?} cannot be typed: {e}"))
            })?
        }
    };
    let mode = match request.force {
        true => Mode::Forced,
        false => Mode::Gated,
    };
    Ok(app.deliverer.manual_wake(&session_id, &text, mode).await)
}
