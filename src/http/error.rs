//! The one mapping from everything a request can run into to an HTTP status and JSON body, with
//! the rate-limited rejection log. 5xx bodies never carry internals; the log does.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use strum::{IntoStaticStr, VariantNames};

use crate::spool::SpoolError;
use crate::wire::event::EventError;

#[derive(Debug, thiserror::Error, IntoStaticStr, VariantNames)]
#[strum(serialize_all = "kebab-case")]
pub enum ApiError {
    #[error("unexpected Host {0:?}")]
    Host(String),
    /// A request to act sent by a page of another site (its `Origin` is not this daemon).
    #[error(
        "a page from {0} may not use this daemon: only its own page at / and clients that are no other site's page (curl, the CLI) may"
    )]
    Origin(String),
    #[error("not found")]
    NotFound,
    #[error("method not allowed")]
    #[strum(serialize = "method")]
    MethodNotAllowed,
    #[error("Content-Type must be application/json")]
    ContentType,
    #[error("body too large")]
    TooLarge,
    #[error("client disconnected mid-body")]
    #[strum(serialize = "disconnect")]
    Disconnected,
    #[error("bad signature")]
    BadSignature,
    #[error(
        "missing or wrong bearer token: send Authorization: Bearer <AGENT_EVENT_BUS_BRIDGE_SECRET>"
    )]
    BadBearer,
    #[error("{0}")]
    Event(#[from] EventError),
    /// A manual wake named something that is not a session id, or a message that does not exist.
    #[error("{0}")]
    BadRequest(String),
    /// An operator's request named a session or a machine the daemon does not know.
    #[error("{0}")]
    Unknown(String),
    /// An operator's request the daemon's state refuses: it would undo what a live session
    /// relies on, or needs what this daemon does not run.
    #[error("{0}")]
    Conflict(String),
    #[error("spool failed: {0}")]
    Spool(#[from] SpoolError),
    #[error("service unavailable: {0}")]
    Unavailable(String),
    /// Another machine of the fleet did not answer a command in time.
    #[error("{0}")]
    Unanswered(String),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Host(_) => StatusCode::MISDIRECTED_REQUEST,
            ApiError::Origin(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound | ApiError::Unknown(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::ContentType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Disconnected | ApiError::Event(_) | ApiError::BadRequest(_) => {
                StatusCode::BAD_REQUEST
            }
            ApiError::BadSignature | ApiError::BadBearer => StatusCode::UNAUTHORIZED,
            ApiError::Spool(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Unanswered(_) => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    /// Every value `reason` can take.
    pub fn reasons() -> impl Iterator<Item = &'static str> {
        ApiError::VARIANTS
            .iter()
            .flat_map(|reason| match *reason {
                "event" => EventError::VARIANTS,
                _ => std::slice::from_ref(reason),
            })
            .copied()
    }

    /// The ledger failed doing `what`: logged with the error, answered 503 without it.
    pub fn ledger(what: &str, error: impl std::fmt::Display) -> Self {
        tracing::warn!(error = %error, "could not {what} in the ledger");
        ApiError::Unavailable("the ledger is not available; see the wakebridge log".into())
    }

    /// Stable reason for the rejection log and the metrics label (short kebab-case).
    pub fn reason(&self) -> &'static str {
        match self {
            ApiError::Event(e) => e.into(),
            other => other.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let message = match &self {
            ApiError::Host(raw) => format!("unexpected Host '{raw}'"),
            // The log has the details; the bus only needs to know to retry.
            ApiError::Spool(_) => {
                "internal error: the event was not spooled; see the wakebridge log".to_string()
            }
            other => other.to_string(),
        };
        let mut response = (self.status(), Json(json!({ "error": message }))).into_response();
        let reason = self.reason();
        response
            .extensions_mut()
            .insert(RejectReason { reason, message });
        response
    }
}

/// Marks a response as a rejection for `guards::log_rejections`: the reason (the metric's label,
/// the rate limit's key) and the body's `error` text, which the log line says.
#[derive(Clone)]
pub struct RejectReason {
    pub reason: &'static str,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_is_listed_and_kebab_case() {
        let all = [
            ApiError::Host("h".into()),
            ApiError::Origin("o".into()),
            ApiError::NotFound,
            ApiError::MethodNotAllowed,
            ApiError::ContentType,
            ApiError::TooLarge,
            ApiError::Disconnected,
            ApiError::BadSignature,
            ApiError::BadBearer,
            ApiError::Event(EventError::InvalidJson),
            ApiError::Event(EventError::NotObject),
            ApiError::Event(EventError::NotSerializable),
            ApiError::BadRequest("b".into()),
            ApiError::Unknown("s".into()),
            ApiError::Conflict("c".into()),
            ApiError::Spool(SpoolError::WriterGone("s".into())),
            ApiError::Unavailable("u".into()),
            ApiError::Unanswered("a".into()),
        ];
        let reasons: Vec<&str> = all.iter().map(ApiError::reason).collect();
        assert_eq!(reasons, ApiError::reasons().collect::<Vec<_>>());
        for reason in reasons {
            assert!(
                reason.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'),
                "{reason}"
            );
        }
    }
}
