//! The fleet's routes. `GET /fleet`: every machine's sessions through the bus (`fleet::view`),
//! this machine first and fresh; this machine alone, with why, when it is in no fleet or the bus
//! does not answer. `POST /fleet/send`: a person's verb for another machine (`wakebridge pause
//! --machine`), answered with that machine's answer. `POST /fleet/hook`: the bus's webhook for
//! this machine's commands. A command runs through the very work and rules of the local route
//! of its verb (`perform`).

use std::sync::{Arc, Weak};

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::ApiError;
use super::guards::{operator_request, read_body, require_json, require_reader};
use super::{pause, rewind, status, wake};
use crate::api::Fleet;
use crate::fleet::command::{COMMAND_EVENT, Performer, SendError, Verb, Via};
use crate::http::AppState;
use crate::telemetry::{FleetRefusal, fleet_refused};
use crate::wire::event::EventError;
use crate::wire::signature::SIGNATURE_HEADER;

const NO_FLEET: &str = "this machine is in no fleet: set [fleet] key_file (a key the fleet's \
                        machines share, chmod 600) on each machine and restart";

/// `/fleet/send`'s body, as a 400 shows it.
const SEND_SHAPE: &str =
    r#"{"machine": "...", "verb": "wake|pause|unpause|rewind", "args": {the verb's own body}}"#;

pub async fn fleet(
    State(app): State<Arc<AppState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    require_reader(&app, &headers)?;
    let views = status::views(&app).await;
    let shared = app.clone();
    let budgets =
        super::guards::blocking("budget reading", move || super::sessions::budgets(&shared))
            .await?;
    let own = crate::fleet::status::of(&machine(&app), &views, &budgets);
    let view = match &app.fleet {
        Some(fleet) => fleet.view(own).await,
        None => Fleet {
            machines: vec![crate::fleet::view::this_machine(own)],
            problem: Some(NO_FLEET.to_owned()),
            refused: 0,
        },
    };
    Ok(Json(view).into_response())
}

/// This machine's name in the fleet: `[fleet] machine`, or the host's.
pub(super) fn machine(app: &AppState) -> String {
    (app.fleet.as_ref()).map_or_else(crate::fleet::host_name, |f| f.config.machine.clone())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SendRequest {
    machine: String,
    verb: Verb,
    #[serde(default)]
    args: Value,
}

pub async fn send(
    State(app): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let request: SendRequest = operator_request(&app, &headers, body, SEND_SHAPE).await?;
    let fleet = app.fleet.as_ref();
    let fleet = fleet.ok_or_else(|| ApiError::Conflict(NO_FLEET.to_owned()))?;
    let (status, answer) = if request.machine == fleet.config.machine {
        answered(perform(&app, request.verb, request.args).await)
    } else {
        let reply = fleet.send(&request.machine, request.verb, request.args);
        let reply = reply.await.map_err(|e| match e {
            SendError::NoSuchMachine { .. } => ApiError::Unknown(e.to_string()),
            SendError::Offline { .. } => ApiError::Conflict(e.to_string()),
            SendError::Bus(_) => ApiError::Unavailable(e.to_string()),
            SendError::Unanswered { .. } => ApiError::Unanswered(e.to_string()),
        })?;
        (reply.status, reply.answer)
    };
    Ok(Json(
        json!({"machine": request.machine, "status": status, "answer": answer}),
    ))
}

/// The bus's webhook for this machine's commands: the bus's signature checked as `/hook`
/// checks it, then the command taken off the request (the bus waits 5 s; a wake may take 4).
pub async fn hook(
    State(app): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    require_json(&headers)?;
    let bytes = read_body(&headers, body).await?;
    let fleet = app.fleet.clone();
    let fleet = fleet.ok_or_else(|| ApiError::Conflict(NO_FLEET.to_owned()))?;
    let signature = headers.get(SIGNATURE_HEADER).map(HeaderValue::as_bytes);
    if let Some(secret) = &app.config.secret
        && !secret.verify(&bytes, signature)
    {
        fleet_refused(FleetRefusal::BusSignature);
        return Err(ApiError::BadSignature);
    }
    let event: Value =
        serde_json::from_slice(&bytes).map_err(|_| ApiError::Event(EventError::InvalidJson))?;
    if event["event_type"] != COMMAND_EVENT {
        return Ok(Json(
            json!({"status": "ignored", "reason": "not a command"}),
        ));
    }
    tokio::spawn(async move { fleet.receive(&event, Via::Webhook).await });
    Ok(Json(json!({"status": "taken"})))
}

/// How this daemon runs a verb another machine sent.
pub fn performer(app: Weak<AppState>) -> Performer {
    Box::new(move |verb, args| {
        let app = app.clone();
        Box::pin(async move {
            match app.upgrade() {
                Some(app) => answered(perform(&app, verb, args).await),
                None => (503, json!({"error": "the daemon is stopping"})),
            }
        })
    })
}

/// Runs `verb` with `args` as its local route's body, through the route's own work and rules.
async fn perform(app: &Arc<AppState>, verb: Verb, args: Value) -> Result<Value, ApiError> {
    match verb {
        Verb::Wake => (wake::woken(app, shaped(args, wake::SHAPE)?).await)
            .map(|delivered| super::hook::delivered_body(&delivered)),
        Verb::Pause => pause::paused(app, shaped(args, pause::PAUSE_SHAPE)?).await,
        Verb::Unpause => pause::unpaused(app, shaped(args, pause::UNPAUSE_SHAPE)?).await,
        Verb::Rewind => rewind::asked_for(app, shaped(args, rewind::SHAPE)?).await,
    }
}

fn shaped<T: DeserializeOwned>(args: Value, shape: &str) -> Result<T, ApiError> {
    serde_json::from_value(args).map_err(|e| ApiError::BadRequest(format!("expected {shape}: {e}")))
}

/// A route's outcome as its status and body.
fn answered(outcome: Result<Value, ApiError>) -> (u16, Value) {
    match outcome {
        Ok(answer) => (200, answer),
        Err(e) => (e.status().as_u16(), json!({ "error": e.to_string() })),
    }
}
