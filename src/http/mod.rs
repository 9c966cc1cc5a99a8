//! The HTTP surface: the router, the Host guard ahead of routing, the handlers. `openapi.yaml`
//! documents the routes; a test keeps the two in step.

mod changes;
mod error;
pub mod fleet;
mod forget;
mod guards;
mod health;
pub(crate) mod history;
mod hook;
mod page;
mod pause;
mod rewind;
mod sessions;
pub(crate) mod state;
pub(crate) mod status;
mod wake;

use std::sync::Arc;

use axum::Router;
use axum::middleware;
use axum::routing::{get, post};

pub use error::ApiError;
pub use guards::MAX_BODY_BYTES;
pub use state::AppState;

/// Every route the daemon serves, as (method, path); `openapi.yaml` must list exactly these.
pub const ROUTES: &[(&str, &str)] = &[
    ("get", "/"),
    ("post", "/hook"),
    ("get", "/health"),
    ("post", "/wake"),
    ("post", "/rewind"),
    ("post", "/forget"),
    ("post", "/pause"),
    ("post", "/unpause"),
    ("get", "/sessions"),
    ("get", "/fleet"),
    ("get", "/changes"),
    ("get", "/history"),
    ("post", "/fleet/send"),
    ("post", "/fleet/hook"),
    ("get", "/metrics"),
];

pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/", get(page::page))
        .route("/hook", post(hook::hook))
        .route("/health", get(health::health))
        .route("/wake", post(wake::wake))
        .route("/rewind", post(rewind::rewind))
        .route("/forget", post(forget::forget))
        .route("/pause", post(pause::pause))
        .route("/unpause", post(pause::unpause))
        .route("/sessions", get(sessions::sessions))
        .route("/fleet", get(fleet::fleet))
        .route("/changes", get(changes::changes))
        .route("/history", get(history::history))
        .route("/fleet/send", post(fleet::send))
        .route("/fleet/hook", post(fleet::hook))
        .route("/metrics", get(sessions::metrics))
        .fallback(|| async { ApiError::NotFound })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(middleware::from_fn_with_state(
            state.clone(),
            guards::host_guard,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            guards::log_rejections,
        ))
        .with_state(state)
}
