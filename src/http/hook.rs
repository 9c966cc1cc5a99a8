//! `POST /hook`: the bus's webhook, checked in the reference's exact order (content type, declared
//! size, streamed size, signature, JSON, shape, level, target) before the delivery pipeline runs.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::ApiError;
use super::guards::{read_body, require_json};
use crate::delivery::{Delivered, Outcome};
use crate::http::AppState;
use crate::warn_limited;
use crate::wire::event::{self, Triage};
use crate::wire::signature::SIGNATURE_HEADER;

/// Bodies above this are parsed on a blocking thread, not stalling the request loop.
const INLINE_PARSE_MAX: usize = 64 * 1024;

pub async fn hook(State(app): State<Arc<AppState>>, headers: HeaderMap, body: Body) -> Response {
    let started = std::time::Instant::now();
    let response = handle(&app, &headers, body).await.unwrap_or_else(|error| {
        if let ApiError::Spool(e) = &error {
            tracing::error!(error = %e, kind = e.kind(), "spooling failed; answering 500 so the bus retries");
            crate::telemetry::error(e.kind());
        }
        error.into_response()
    });
    crate::telemetry::hook_latency(started.elapsed().as_secs_f64());
    response
}

async fn handle(app: &AppState, headers: &HeaderMap, body: Body) -> Result<Response, ApiError> {
    require_json(headers)?;
    let bytes = read_body(headers, body).await?;
    let signature = headers.get(SIGNATURE_HEADER).map(HeaderValue::as_bytes);
    if let Some(secret) = &app.config.secret
        && !secret.verify(&bytes, signature)
    {
        return Err(ApiError::BadSignature);
    }
    let triage = if bytes.len() > INLINE_PARSE_MAX {
        let owned = bytes.clone();
        super::guards::blocking("parser task", move || event::triage(&owned)).await?
    } else {
        event::triage(&bytes)
    }?;
    match triage {
        Triage::BelowActionable { has_level } => {
            note_level(app, has_level);
            Ok(ignored("below actionable"))
        }
        Triage::NoTarget { unsafe_channel } => {
            if let Some(channel) = unsafe_channel {
                warn_limited!(app.unsafe_ids, "unsafe-id", channel = %channel, "ignoring event for unsafe session id in channel {channel:?}: ids must match [A-Za-z0-9_-]{{1,64}}");
            }
            Ok(ignored("no target session"))
        }
        Triage::Deliver(event) => match app.deliverer.deliver(event).await? {
            Outcome::Delivered(delivered) => Ok(delivered_json(&delivered)),
            Outcome::NotLocal => Ok(ignored("not a local session")),
        },
    }
}

/// An old bus sends no `signal_level`: say so once (INFO), until a levelled event re-arms it.
fn note_level(app: &AppState, has_level: bool) {
    if has_level {
        app.level_notice_armed.store(true, Ordering::Relaxed);
        tracing::debug!("ignoring event below actionable");
    } else if app.level_notice_armed.swap(false, Ordering::Relaxed) {
        tracing::info!(
            "event carries no signal_level (a bus older than #129?); filtering it as below actionable"
        );
    } else {
        tracing::debug!("event carries no signal_level; filtered");
    }
}

fn ignored(reason: &str) -> Response {
    Json(json!({"status": "ignored", "reason": reason})).into_response()
}

pub fn delivered_json(d: &Delivered) -> Response {
    Json(delivered_body(d)).into_response()
}

/// The answer to a delivery or a wake, counted as one.
pub fn delivered_body(d: &Delivered) -> serde_json::Value {
    crate::telemetry::delivered(d.action.as_str(), d.duplicate);
    let mut body =
        json!({"status": "delivered", "action": d.action.as_str(), "session_id": d.session_id});
    if d.duplicate {
        body["duplicate"] = json!(true);
    }
    body
}
