//! Request guards: the Host allowlist (DNS rebinding, ahead of routing), the JSON content type, the
//! body size cap, the bearer secret of the operators' routes; and their blocking work.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde::de::DeserializeOwned;

use super::ApiError;
use super::error::RejectReason;
use crate::http::AppState;
use crate::warn_limited;
use crate::wire::session_id::SessionId;

/// Largest body accepted: exactly 1 MiB passes, one byte more is 413.
pub const MAX_BODY_BYTES: usize = 1_048_576;

/// 421 for any Host outside the allowlist, before routing: a foreign Host learns no routes. 403
/// for a request from another site's page: a browser names the page's origin, and with no
/// secret configured (the loopback default) nothing else would tell it from this daemon's own
/// page. (Such a page cannot send JSON without asking first either, and nothing here answers
/// that preflight.)
pub async fn host_guard(
    State(app): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let raw = request
        .headers()
        .get(header::HOST)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default();
    if app.config.topology.allowlist.allows(&raw) {
        if let Some(origin) = another_site(&request, &raw) {
            return ApiError::Origin(origin).into_response();
        }
        return next.run(request).await;
    }
    warn_limited!(
        app.rejections,
        "host",
        host = %raw,
        allowed = ?app.config.topology.allowlist.iter().collect::<Vec<_>>(),
        "rejected request with unexpected Host {raw:?} (421); if a proxy forwards to this bridge, add its Host with --allowed-hosts / AGENT_EVENT_BUS_BRIDGE_ALLOWED_HOSTS"
    );
    ApiError::Host(raw).into_response()
}

/// The other site a browser sent this request from, if it did: a change whose `Origin` is not
/// `scheme://<host>` of the request's own Host (another site's page, or `null`: a sandboxed or
/// local file's), or a read the browser marks as another site's that is no navigation (an
/// `<img>` or a `fetch` of another page: opaque to it, yet work for the daemon). curl, the CLI
/// and the bus send neither header.
fn another_site(request: &Request, host: &str) -> Option<String> {
    let named = |name| {
        let value = request.headers().get(name)?;
        Some(String::from_utf8_lossy(value.as_bytes()).into_owned())
    };
    if !request.method().is_safe() {
        let origin = named(header::ORIGIN)?;
        let authority = origin.split_once("://").map(|(_, rest)| rest);
        return (authority != Some(host)).then_some(origin);
    }
    let site = named(HeaderName::from_static("sec-fetch-site"))?;
    let navigation =
        named(HeaderName::from_static("sec-fetch-mode")).as_deref() == Some("navigate");
    let elsewhere = site == "cross-site" || site == "same-site";
    (elsewhere && !navigation).then(|| named(header::ORIGIN).unwrap_or(format!("a {site} page")))
}

/// Logs every rejection once per reason per minute (repeats at debug) and counts it.
pub async fn log_rejections(
    State(app): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_string();
    let response = next.run(request).await;
    if let Some(reject) = response.extensions().get::<RejectReason>() {
        let reason = reject.reason;
        crate::telemetry::rejected(reason);
        // The Host guard logs its own rejection with the allowlist and the fix.
        if reason == "host" {
            return response;
        }
        let status = response.status().as_u16();
        warn_limited!(app.rejections, reason, path = %path, status, reason, "rejected request: {}", reject.message);
    }
    response
}

/// The JSON content type: the text before `;`, trimmed and lowercased, is `application/json`.
pub fn require_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let value = headers.get(header::CONTENT_TYPE).map(|v| v.to_str());
    let media = value.and_then(Result::ok).unwrap_or_default();
    let media = media.split(';').next().unwrap_or_default().trim();
    (media.eq_ignore_ascii_case("application/json"))
        .then_some(())
        .ok_or(ApiError::ContentType)
}

/// Reads the body under the cap, declared or streamed; a client that goes away gets 400.
pub async fn read_body(headers: &HeaderMap, body: Body) -> Result<axum::body::Bytes, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|v| v.parse::<u128>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u128) {
        return Err(ApiError::TooLarge);
    }
    match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(ApiError::TooLarge),
        Err(_) => Err(ApiError::Disconnected),
    }
}

/// An operator's request (`/wake`, `/rewind`, `/forget`): JSON within the size cap, with the
/// bearer when a secret is configured. `shape` is the body the 400 shows.
pub async fn operator_request<T: DeserializeOwned>(
    app: &AppState,
    headers: &HeaderMap,
    body: Body,
    shape: &str,
) -> Result<T, ApiError> {
    require_json(headers)?;
    let bytes = read_body(headers, body).await?;
    require_bearer(app, headers)?;
    serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::BadRequest(format!("expected {shape}: {e}")))
}

/// Runs `work` on a blocking thread, off the request threads; a task that dies is a 503.
pub async fn blocking<T: Send + 'static>(
    what: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    let done = tokio::task::spawn_blocking(work).await;
    done.map_err(|_| ApiError::Unavailable(format!("{what} failed")))
}

pub fn session_id(id: &str) -> Result<SessionId, ApiError> {
    SessionId::parse(id)
        .ok_or_else(|| ApiError::BadRequest("session_id must match [A-Za-z0-9_-]{1,64}".into()))
}

fn require_bearer(app: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(secret) = &app.config.secret else {
        return Ok(());
    };
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
        .unwrap_or_default();
    secret
        .matches_token(token)
        .then_some(())
        .ok_or(ApiError::BadBearer)
}

/// `/sessions` and `/metrics` show ids, directories and panes: beyond loopback, with a secret
/// set, they need the bearer too.
pub fn require_reader(app: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    if app.config.topology.bind.is_loopback() {
        return Ok(());
    }
    require_bearer(app, headers)
}
