//! `GET /fleet`: every machine's sessions through the bus (`fleet::view`), this machine first
//! and fresh; this machine alone, with why, when it is in no fleet or the bus does not answer.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

use super::ApiError;
use super::guards::require_reader;
use crate::api::Fleet;
use crate::http::AppState;
use crate::http::status;

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
    let machine =
        (app.fleet.as_ref()).map_or_else(crate::fleet::host_name, |f| f.config.machine.clone());
    let own = crate::fleet::status::of(&machine, &views, &budgets);
    let view = match &app.fleet {
        Some(fleet) => fleet.view(own).await,
        None => Fleet {
            machines: vec![crate::fleet::view::this_machine(own)],
            problem: Some(
                "this machine is in no fleet: set [fleet] key_file (a key the fleet's machines \
                 share, chmod 600) on each machine and restart"
                    .to_owned(),
            ),
            refused: 0,
        },
    };
    Ok(Json(view).into_response())
}
