//! A stand-in for OpenAI's Responses API, so the real Codex CLI runs whole turns offline: each
//! `POST /v1/responses` is answered with one streamed assistant message (the events Codex reads:
//! `response.created`, `response.output_item.added`, `response.output_text.delta`,
//! `response.output_item.done`, `response.completed` with usage) and the `x-codex-*` rate-limit
//! headers of a subscriber's 5-hour and weekly windows; every request is recorded.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// What every turn answers.
pub const REPLY: &str = "Hello from the stand-in.";

pub struct Responses {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl Responses {
    pub async fn start() -> Responses {
        super::timeout::arm_test_timeout();
        let requests: Arc<Mutex<Vec<Value>>> = Arc::default();
        let shared = requests.clone();
        let app = axum::Router::new().fallback(move |uri: Uri, body: Bytes| {
            let requests = shared.clone();
            async move { answer(&requests, &uri, &body) }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the stand-in");
        let addr = listener.local_addr().expect("stand-in addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        Responses { addr, requests }
    }

    /// `config.toml` for a `CODEX_HOME` that sends every turn here (the key in `STUB_API_KEY`).
    pub fn codex_config(&self) -> String {
        format!(
            "model = \"stand-in\"\nmodel_provider = \"stub\"\n\n[model_providers.stub]\n\
             name = \"stub\"\nbase_url = \"http://{}/v1\"\nwire_api = \"responses\"\n\
             env_key = \"STUB_API_KEY\"\n",
            self.addr
        )
    }

    /// The bodies of the conversation requests so far.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().expect("requests").clone()
    }
}

fn answer(requests: &Mutex<Vec<Value>>, uri: &Uri, body: &[u8]) -> Response {
    if !uri.path().ends_with("/responses") {
        // Model listings and the like: nothing to offer.
        return axum::Json(json!({"data": [], "models": []})).into_response();
    }
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    requests.lock().expect("requests").push(request);
    let id = format!("resp_{}", requests.lock().expect("requests").len());
    let message = json!({"type": "message", "role": "assistant", "id": format!("msg_{id}"),
                         "content": [{"type": "output_text", "text": REPLY}]});
    let mut started = message.clone();
    started["content"] = json!([]);
    let events = [
        json!({"type": "response.created", "response": {"id": id}}),
        json!({"type": "response.output_item.added", "item": started}),
        json!({"type": "response.output_text.delta", "delta": REPLY, "item_id": message["id"],
               "output_index": 0, "content_index": 0}),
        json!({"type": "response.output_item.done", "item": message}),
        json!({"type": "response.completed", "response": {"id": id, "usage": {
            "input_tokens": 1234, "input_tokens_details": {"cached_tokens": 200},
            "output_tokens": 56, "output_tokens_details": {"reasoning_tokens": 7},
            "total_tokens": 1290}}}),
    ];
    let stream: String = (events.iter())
        .map(|e| {
            format!(
                "event: {}\ndata: {e}\n\n",
                e["type"].as_str().unwrap_or_default()
            )
        })
        .collect();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let headers = [
        ("content-type", "text/event-stream".to_owned()),
        ("x-codex-primary-used-percent", "12.5".to_owned()),
        ("x-codex-primary-window-minutes", "300".to_owned()),
        ("x-codex-primary-reset-at", (now + 3600).to_string()),
        ("x-codex-secondary-used-percent", "40".to_owned()),
        ("x-codex-secondary-window-minutes", "10080".to_owned()),
        ("x-codex-secondary-reset-at", (now + 86_400).to_string()),
    ];
    let mut response = (StatusCode::OK, stream).into_response();
    for (name, value) in headers {
        if let Ok(value) = value.parse() {
            response.headers_mut().insert(name, value);
        }
    }
    response
}
