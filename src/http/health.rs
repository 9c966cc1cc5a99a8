//! `GET`/`HEAD /health`: liveness plus what an installer needs to tell two instances apart
//! (pid, version, start time, the config file it read) and whether our webhook row was there at the last verification.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::http::AppState;

pub async fn health(State(app): State<Arc<AppState>>) -> Json<Value> {
    let rfc3339 = |at| humantime::format_rfc3339_seconds(at).to_string();
    let mut body = json!({
        "status": "ok",
        "service": "wakebridge",
        "version": env!("CARGO_PKG_VERSION"),
        "pid": std::process::id(),
        "started_at": rfc3339(app.started_at),
        "config_file": app.config.paths.config_file,
        "bus_url": app.config.bus_url,
        "backend": match app.config.backend {
            crate::config::Backend::Mux => "mux",
            crate::config::Backend::Spool => "spool",
        },
    });
    // Only with registration enabled; `registered` reflects the last verification.
    if let Some(registration) = &app.registration {
        let snapshot = registration.snapshot();
        body["registered"] = json!(snapshot.registered);
        body["webhook_id"] = json!(snapshot.webhook_id);
        body["last_verified_at"] = json!(snapshot.last_verified_at.map(rfc3339));
    }
    Json(body)
}
