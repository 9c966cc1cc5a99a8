//! A stand-in for OpenAI's Responses API, so the real Codex CLI runs whole turns offline: each
//! `POST /v1/responses` is answered with one streamed assistant message (the events Codex reads:
//! `response.created`, `response.output_item.added`, `response.output_text.delta`,
//! `response.output_item.done`, `response.completed` with usage) and the `x-codex-*` rate-limit
//! headers of a subscriber's 5-hour and weekly windows; every request is recorded. A test can
//! slow the answer to a text, fill the context (`[[context N]]` in a prompt: N % of
//! [`WINDOW`], kept for the answers after it) and hold the account at its 5-hour limit (a 429
//! `usage_limit_reached` with the window at 100 %) until a reset.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// What every turn answers.
pub const REPLY: &str = "Hello from the stand-in.";
/// The window Codex 0.171.0 counts a model it has no metadata for against (the rollout's
/// `model_context_window`): `[[context N]]` fills N % of it.
pub const WINDOW: u64 = 258_400;
/// The usage of an answer before any `[[context N]]`.
pub const FIRST_TOTAL: u64 = 1290;

/// One request, as the stand-in saw it.
#[derive(Debug, Clone)]
pub struct Request {
    /// The user texts after the conversation's last assistant message: what is new to the model.
    pub new_texts: Vec<String>,
    pub status: u16,
}

#[derive(Default)]
struct Script {
    requests: Vec<Request>,
    /// An answer to a text starting so is this much later.
    slow: Vec<(String, Duration)>,
    /// The context the answers report (`[[context N]]` moves it).
    total: Option<u64>,
    /// Answered 429 until then (unix seconds).
    limited_until_s: Option<u64>,
}

#[derive(Clone)]
pub struct Responses {
    addr: SocketAddr,
    script: Arc<Mutex<Script>>,
}

impl Responses {
    pub async fn start() -> Responses {
        super::timeout::arm_test_timeout();
        let script: Arc<Mutex<Script>> = Arc::default();
        let shared = script.clone();
        let app = axum::Router::new().fallback(move |uri: Uri, body: Bytes| {
            let script = shared.clone();
            async move { answer(&script, &uri, &body).await }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the stand-in");
        let addr = listener.local_addr().expect("stand-in addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        Responses { addr, script }
    }

    fn lock(&self) -> MutexGuard<'_, Script> {
        self.script.lock().expect("script")
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

    /// Answers a request whose new text starts with `text` only after `delay`.
    pub fn slow(&self, text: &str, delay: Duration) {
        self.lock().slow.push((text.to_owned(), delay));
    }

    /// Answers 429 at the 5-hour limit until `unix_s`.
    pub fn limit_until(&self, unix_s: u64) {
        self.lock().limited_until_s = Some(unix_s);
    }

    /// The conversation requests so far.
    pub fn requests(&self) -> Vec<Request> {
        self.lock().requests.clone()
    }

    /// Requests with a new user text that starts with `text`: how many times the model was told
    /// it.
    pub fn told(&self, text: &str) -> usize {
        let told = |r: &&Request| r.new_texts.iter().any(|t| t.trim().starts_with(text));
        self.lock().requests.iter().filter(told).count()
    }

    /// Requests whose new text mentions `text` anywhere (a warning starts with its level's
    /// words; a Stop hook's reason comes wrapped in `<hook_prompt>`).
    pub fn mentioned(&self, text: &str) -> usize {
        let says = |r: &&Request| r.new_texts.iter().any(|t| t.contains(text));
        self.lock().requests.iter().filter(says).count()
    }

    /// Requests answered with `status`.
    pub fn answered(&self, status: u16) -> usize {
        let lock = self.lock();
        lock.requests.iter().filter(|r| r.status == status).count()
    }

    /// The new texts of every request, one line each, for failure messages.
    pub fn transcript(&self) -> String {
        let lock = self.lock();
        let lines = lock.requests.iter().enumerate();
        lines
            .map(|(n, r)| format!("{n} [{}] {:?}\n", r.status, r.new_texts))
            .collect()
    }
}

/// The user texts after the last assistant message of a request's `input`.
fn new_texts(request: &Value) -> Vec<String> {
    let input = request["input"].as_array().cloned().unwrap_or_default();
    let last_answer = input.iter().rposition(|item| item["role"] == "assistant");
    let new = input.into_iter().skip(last_answer.map_or(0, |at| at + 1));
    new.filter(|item| item["role"] == "user")
        .flat_map(|item| item["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|content| content["text"].as_str().map(str::to_owned))
        .collect()
}

/// N from a `[[context N]]` in `texts`.
fn context_marker(texts: &[String]) -> Option<u64> {
    texts.iter().find_map(|t| {
        let rest = &t[t.find("[[context ")? + "[[context ".len()..];
        rest[..rest.find("]]")?].trim().parse().ok()
    })
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

async fn answer(script: &Mutex<Script>, uri: &Uri, body: &[u8]) -> Response {
    if !uri.path().ends_with("/responses") {
        // Model listings and the like: nothing to offer.
        return axum::Json(json!({"data": [], "models": []})).into_response();
    }
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let new_texts = new_texts(&request);
    let now = unix_now();
    let (limited, delay, total, id) = {
        let mut script = script.lock().expect("script");
        let limited = script.limited_until_s.filter(|until| *until > now);
        if let Some(n) = context_marker(&new_texts) {
            script.total = Some(WINDOW * n / 100);
        }
        let slow = script
            .slow
            .iter()
            .find(|(text, _)| (new_texts.iter()).any(|t| t.trim().starts_with(text.as_str())));
        let delay = slow.map(|(_, delay)| *delay).filter(|_| limited.is_none());
        let status = if limited.is_some() { 429 } else { 200 };
        script.requests.push(Request { new_texts, status });
        let total = script.total.unwrap_or(FIRST_TOTAL);
        (
            limited,
            delay,
            total,
            format!("resp_{}", script.requests.len()),
        )
    };
    if let Some(resets_at) = limited {
        return at_the_limit(resets_at, now);
    }
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
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
            "input_tokens": total - 56, "input_tokens_details": {"cached_tokens": 200},
            "output_tokens": 56, "output_tokens_details": {"reasoning_tokens": 7},
            "total_tokens": total}}}),
    ];
    let stream: String = (events.iter())
        .map(|e| {
            format!(
                "event: {}\ndata: {e}\n\n",
                e["type"].as_str().unwrap_or_default()
            )
        })
        .collect();
    with_windows(
        (StatusCode::OK, stream).into_response(),
        12.5,
        now + 3600,
        now,
    )
}

/// A subscriber's answer at its 5-hour limit, as Codex reads it: 429 `usage_limit_reached`, the
/// window used up until `resets_at`.
fn at_the_limit(resets_at: u64, now: u64) -> Response {
    let error = json!({"error": {"type": "usage_limit_reached", "plan_type": "plus",
        "message": "The usage limit has been reached", "resets_at": resets_at,
        "resets_in_seconds": resets_at.saturating_sub(now)}});
    let response = (StatusCode::TOO_MANY_REQUESTS, axum::Json(error)).into_response();
    with_windows(response, 100.0, resets_at, now)
}

/// `response` with the `x-codex-*` headers of the 5-hour window (`used`, resetting at
/// `resets_at`) and a week 40 % used.
fn with_windows(mut response: Response, used: f64, resets_at: u64, now: u64) -> Response {
    let headers = [
        ("content-type", None),
        ("x-codex-primary-used-percent", Some(used.to_string())),
        ("x-codex-primary-window-minutes", Some("300".to_owned())),
        ("x-codex-primary-reset-at", Some(resets_at.to_string())),
        ("x-codex-secondary-used-percent", Some("40".to_owned())),
        ("x-codex-secondary-window-minutes", Some("10080".to_owned())),
        (
            "x-codex-secondary-reset-at",
            Some((now + 86_400).to_string()),
        ),
    ];
    for (name, value) in headers {
        let value = value.unwrap_or_else(|| {
            let json = response.status() != StatusCode::OK;
            (if json {
                "application/json"
            } else {
                "text/event-stream"
            })
            .to_owned()
        });
        if let Ok(value) = value.parse() {
            response.headers_mut().insert(name, value);
        }
    }
    response
}
