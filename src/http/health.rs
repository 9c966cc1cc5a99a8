//! `GET`/`HEAD /health`: liveness plus what an installer needs to tell two instances apart
//! (pid, version, start time) and whether our webhook row was there at the last verification.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::http::AppState;

pub async fn health(State(app): State<Arc<AppState>>) -> Json<Value> {
    let mut body = json!({
        "status": "ok",
        "service": "wakebridge",
        "version": env!("CARGO_PKG_VERSION"),
        "pid": std::process::id(),
        "started_at": app.started_at_rfc3339(),
    });
    if let Some(reg) = app.registration_json()
        && let (Value::Object(target), Value::Object(extra)) = (&mut body, reg)
    {
        target.extend(extra);
    }
    Json(body)
}
