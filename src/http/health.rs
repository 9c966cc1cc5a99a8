//! `GET`/`HEAD /health`: liveness plus what an installer needs to tell two instances apart
//! (pid, version, start time) and whether our webhook row was there at the last verification;
//! for `doctor`, also the backend, bus URL and config file the instance runs with, which are
//! shown only where `/sessions` would be (loopback, or with the bearer beyond it).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use serde_json::{Value, json};

use crate::http::AppState;

pub async fn health(State(app): State<Arc<AppState>>, headers: HeaderMap) -> Json<Value> {
    let rfc3339 = |at| humantime::format_rfc3339_seconds(at).to_string();
    let mut body = json!({
        "status": "ok",
        "service": "wakebridge",
        "version": env!("CARGO_PKG_VERSION"),
        "pid": std::process::id(),
        "started_at": rfc3339(app.started_at),
    });
    if super::guards::require_reader(&app, &headers).is_ok() {
        body["config_file"] = json!(app.config.paths.config_file);
        body["bus_url"] = json!(app.config.bus_url);
        body["backend"] = json!(match app.config.backend {
            crate::config::Backend::Mux => "mux",
            crate::config::Backend::Spool => "spool",
        });
    }
    // Only with registration enabled; `registered` reflects the last verification.
    if let Some(registration) = &app.registration {
        let snapshot = registration.snapshot();
        body["registered"] = json!(snapshot.registered);
        body["webhook_id"] = json!(snapshot.webhook_id);
        body["last_verified_at"] = json!(snapshot.last_verified_at.map(rfc3339));
    }
    Json(body)
}
