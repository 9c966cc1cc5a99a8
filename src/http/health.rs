//! `GET`/`HEAD /health`: liveness, what tells two instances apart, and the registration's state;
//! the configuration only where `/sessions` may be read.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use jiff::Timestamp;

use crate::api::{Health, Shown};
use crate::clock;
use crate::http::AppState;

pub async fn health(State(app): State<Arc<AppState>>, headers: HeaderMap) -> Json<Health> {
    let reader = super::guards::require_reader(&app, &headers).is_ok();
    let config = &app.config;
    // Only with registration enabled; `registered` reflects the last verification.
    let registration = app.registration.as_ref().map(|r| r.snapshot());
    Json(Health {
        status: "ok".into(),
        service: "wakebridge".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        pid: std::process::id(),
        started_at: clock::shown(app.started_at).unwrap_or(Timestamp::UNIX_EPOCH),
        config_file: if reader {
            Shown::Value(config.paths.config_file.clone())
        } else {
            Shown::Hidden
        },
        bus_url: reader.then(|| config.bus_url.clone()),
        backend: reader.then(|| <&str>::from(config.backend).into()),
        registered: registration.as_ref().map(|r| r.registered),
        webhook_id: registration
            .as_ref()
            .map_or(Shown::Hidden, |r| Shown::Value(r.webhook_id)),
        last_verified_at: registration.as_ref().map_or(Shown::Hidden, |r| {
            Shown::Value(r.last_verified_at.and_then(clock::shown))
        }),
        fleet: (app.fleet.as_ref()).filter(|_| reader).map(|fleet| {
            let webhook = app
                .registration
                .as_ref()
                .map(|_| fleet.webhook.snapshot().registered);
            fleet.health(webhook)
        }),
    })
}
