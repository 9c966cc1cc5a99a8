//! A scripted stand-in for Anthropic's Messages API, so the real Claude Code runs whole turns
//! offline (`../shared/reference/scripted-model-api.md`): it answers the streaming and plain
//! `POST /v1/messages`, `count_tokens` and the start-up probes, and records every request.
//!
//! A turn is scripted by what its prompt says (the last user message that carries no tool
//! result), so one model serves a whole session without per-test state:
//! - `[[sleep N]]` (any number of them): one Bash tool call `sleep N` per marker, in order,
//!   each run for real by Claude Code before the next request;
//! - `[[context P]]`: the turn's usage fills P % of [`WINDOW`] (input + cache read), as
//!   the transcript then records it;
//! - a prompt with no marker (a wake prompt, a nudge, a Stop hook's reason) gets the reply of
//!   the first rule added with [`Model::on`] whose text it contains, else a one-line answer.
//!
//! A usage limit is [`Model::limit_until`]: until then every conversation request is answered
//! 429 with the unified rate-limit headers Claude Code reads for a subscriber at its 5-hour
//! limit. Side calls (a title, a classifier: no `Bash` tool offered) always get a short text
//! and are recorded but never scripted.
//!
//! [`Model::windows`] puts a subscriber's 5-hour and 7-day usage on every answer, the start-up
//! quota probe and side calls too: Claude Code 2.1.332 shows a window in its status line's
//! `rate_limits` when an answer carries its `…-utilization` (0..1) and `…-reset` (unix s)
//! headers, and an answer without them clears the block (`docs/design.md`).

use std::io::Read as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// The context window the `[[context P]]` usage is a share of: the one Claude Code 2.1.332 gives
/// its default model (Sonnet 5.5) in its status line, and wakebridge's table for that model.
pub const WINDOW: u64 = 1_000_000;
/// The model id an answer names when the request names none (the API echoes the request's).
pub const MODEL_ID: &str = "claude-sonnet-5-5";

/// What a scripted turn does: the Bash commands it runs, one tool call each, then its text.
#[derive(Debug, Clone, Default)]
pub struct Reply {
    pub commands: Vec<String>,
    pub text: String,
    /// The share of the window the turn's usage reports, in percent.
    pub context_pct: Option<f64>,
}

impl Reply {
    /// A turn that only answers `text`.
    pub fn text(text: &str) -> Self {
        Self {
            text: text.to_owned(),
            ..Self::default()
        }
    }

    /// A turn that answers `text` with usage that fills `pct` % of the window.
    pub fn at_context(text: &str, pct: f64) -> Self {
        Self {
            context_pct: Some(pct),
            ..Self::text(text)
        }
    }
}

/// One request the stand-in answered.
#[derive(Debug, Clone)]
pub struct Request {
    pub at: SystemTime,
    /// The main conversation (it offers the Bash tool), not a side call.
    pub main: bool,
    /// Everything after the last assistant message (the prompt, tool results, a Stop hook's
    /// reason, an inbox message), without `<system-reminder>` blocks: what was new to the model.
    pub new_text: String,
    /// 200, or 429 while limited.
    pub status: u16,
}

#[derive(Default)]
struct State {
    rules: Vec<(String, Reply)>,
    requests: Vec<Request>,
    limit_until_s: Option<u64>,
    /// (utilization 0..1, reset unix s) of the 5-hour and 7-day windows, sent on every answer.
    windows: Option<[(f64, u64); 2]>,
    next_id: u64,
}

/// The running stand-in. Dropping it leaves the server task to the test's runtime.
#[derive(Clone)]
pub struct Model {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
}

impl Model {
    pub async fn start() -> Model {
        super::timeout::arm_test_timeout();
        let state: Arc<Mutex<State>> = Arc::default();
        let shared = state.clone();
        let app = axum::Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let state = shared.clone();
                async move { answer(&state, &method, &uri, &headers, &body) }
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the model");
        let addr = listener.local_addr().expect("model addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        Model { addr, state }
    }

    /// `ANTHROPIC_BASE_URL` for Claude Code.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The environment words that point a Claude Code at this model as a subscriber (a dummy
    /// OAuth token: the real limit notice and menu) that does not retry a 429.
    pub fn claude_env(&self) -> Vec<String> {
        vec![
            "CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-wakebridge-test-token".into(),
            format!("ANTHROPIC_BASE_URL={}", self.url()),
            "CLAUDE_CODE_MAX_RETRIES=0".into(),
            "DISABLE_AUTOUPDATER=1".into(),
        ]
    }

    /// A prompt without markers that contains `text` gets `reply`.
    pub fn on(&self, text: &str, reply: Reply) {
        self.lock().rules.push((text.to_owned(), reply));
    }

    /// Every answer from now on reports the 5-hour window `five` and the 7-day window `week`
    /// used (0..1), each with its reset in unix seconds.
    pub fn windows(&self, five: (f64, u64), week: (f64, u64)) {
        self.lock().windows = Some([five, week]);
    }

    /// Answers 429 at the 5-hour limit until `unix_s`, then normally again.
    pub fn limit_until(&self, unix_s: u64) {
        self.lock().limit_until_s = Some(unix_s);
    }

    /// Main-conversation requests with a line of new text that starts with `text`: how many
    /// times the model was told it (a whole line, so a short word in the environment block
    /// Claude Code sends with a first prompt does not count).
    pub fn told(&self, text: &str) -> usize {
        self.told_at(text).len()
    }

    /// When the model was told `text`, as [`Model::told`] counts it: each such request's time.
    pub fn told_at(&self, text: &str) -> Vec<SystemTime> {
        self.lock()
            .requests
            .iter()
            .filter(|r| r.main && r.new_text.lines().any(|l| l.trim().starts_with(text)))
            .map(|r| r.at)
            .collect()
    }

    /// Every main-conversation request so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        let state = self.lock();
        state.requests.iter().filter(|r| r.main).cloned().collect()
    }

    /// Main-conversation requests whose new text contains `text` anywhere (a Stop hook's
    /// reason reaches the model inside Claude Code's own words).
    pub fn mentioned(&self, text: &str) -> usize {
        self.lock()
            .requests
            .iter()
            .filter(|r| r.main && r.new_text.contains(text))
            .count()
    }

    /// Main-conversation requests whose new text contains both `text` and `with` (an inbox
    /// message handed over in the request that carries a tool's result).
    pub fn mentioned_with(&self, text: &str, with: &str) -> usize {
        self.lock()
            .requests
            .iter()
            .filter(|r| r.main && r.new_text.contains(text) && r.new_text.contains(with))
            .count()
    }

    /// Main-conversation requests answered with `status`.
    pub fn answered(&self, status: u16) -> usize {
        self.lock()
            .requests
            .iter()
            .filter(|r| r.main && r.status == status)
            .count()
    }

    /// A readable list of the main conversation's requests, for failure messages.
    pub fn transcript(&self) -> String {
        let state = self.lock();
        let start = state.requests.first().map_or(UNIX_EPOCH, |r| r.at);
        state
            .requests
            .iter()
            .filter(|r| r.main)
            .map(|r| {
                let at = r.at.duration_since(start).unwrap_or_default().as_secs_f64();
                let text: String = r.new_text.chars().take(160).collect();
                format!("+{at:.1}s {} {text:?}\n", r.status)
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn reply(
    state: &Mutex<State>,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    if method != Method::POST {
        return json_response(StatusCode::OK, json!({}));
    }
    let body = decoded(headers, body);
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if uri.path().ends_with("/count_tokens") {
        return json_response(StatusCode::OK, json!({"input_tokens": 1000}));
    }
    let main = request["tools"]
        .as_array()
        .is_some_and(|tools| tools.iter().any(|t| t["name"] == "Bash"));
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let mut state = state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let now = SystemTime::now();
    let now_s = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let limited = state.limit_until_s.filter(|until| now_s < *until);
    state.requests.push(Request {
        at: now,
        main,
        new_text: new_text(&messages),
        status: if limited.is_some() { 429 } else { 200 },
    });
    if let Some(until) = limited {
        return at_limit(until);
    }
    state.next_id += 1;
    let id = state.next_id;
    let (content, stop, usage) = if main {
        turn_step(&state, &messages, id)
    } else {
        (
            vec![json!({"type": "text", "text": "{\"title\": \"Scripted session\"}"})],
            "end_turn",
            usage_of(None),
        )
    };
    drop(state);
    let message = json!({
        "id": format!("msg_scripted_{id}"),
        "type": "message",
        "role": "assistant",
        "model": request["model"].as_str().unwrap_or(MODEL_ID),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": null,
        "usage": usage,
    });
    if request["stream"] == true {
        stream(&message)
    } else {
        json_response(StatusCode::OK, message)
    }
}

/// [`reply`], with the usage windows on every successful answer once they are set.
fn answer(
    state: &Mutex<State>,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let mut response = reply(state, method, uri, headers, body);
    let windows = state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .windows;
    if let Some([five, week]) = windows.filter(|_| response.status() == StatusCode::OK) {
        let headers = response.headers_mut();
        for (window, (used, reset)) in [("5h", five), ("7d", week)] {
            let (used, reset) = (used.to_string(), reset.to_string());
            for (name, value) in [("utilization", used), ("reset", reset)] {
                let name = format!("anthropic-ratelimit-unified-{window}-{name}");
                let name = axum::http::HeaderName::try_from(name).expect("header name");
                headers.insert(name, value.parse().expect("header value"));
            }
        }
    }
    response
}

/// The next step of the main conversation's turn: a tool call still to make, or the text.
fn turn_step(state: &State, messages: &[Value], id: u64) -> (Vec<Value>, &'static str, Value) {
    let at = messages
        .iter()
        .rposition(|m| m["role"] == "user" && !has_tool_result(m))
        .unwrap_or(0);
    let prompt = texts_of(&messages[at]).join("\n");
    let steps_done = messages[at..]
        .iter()
        .filter(|m| m["role"] == "assistant")
        .count();
    let reply = scripted(&prompt)
        .or_else(|| {
            state
                .rules
                .iter()
                .find(|(text, _)| prompt.contains(text.as_str()))
                .map(|(_, reply)| reply.clone())
        })
        .unwrap_or_else(|| Reply::text("Done."));
    let usage = usage_of(reply.context_pct);
    match reply.commands.get(steps_done) {
        Some(command) => (
            vec![json!({
                "type": "tool_use",
                "id": format!("toolu_scripted_{id}"),
                "name": "Bash",
                "input": {"command": command, "description": "Scripted step"},
            })],
            "tool_use",
            usage,
        ),
        None => {
            let text = if reply.text.is_empty() {
                "Done."
            } else {
                &reply.text
            };
            (
                vec![json!({"type": "text", "text": text})],
                "end_turn",
                usage,
            )
        }
    }
}

/// The reply a prompt's own markers script, if it has any.
fn scripted(prompt: &str) -> Option<Reply> {
    let mut reply = Reply::default();
    let mut marked = false;
    let mut rest = prompt;
    while let Some(start) = rest.find("[[") {
        let Some(len) = rest[start..].find("]]") else {
            break;
        };
        let marker = &rest[start + 2..start + len];
        rest = &rest[start + len + 2..];
        let mut words = marker.split_whitespace();
        match (words.next(), words.next()) {
            (Some("sleep"), Some(secs)) => {
                reply.commands.push(format!("sleep {secs}"));
                marked = true;
            }
            (Some("context"), Some(pct)) => {
                reply.context_pct = pct.parse().ok();
                marked = true;
            }
            _ => {}
        }
    }
    marked.then(|| {
        reply.text = "Scripted turn done.".into();
        reply
    })
}

fn usage_of(context_pct: Option<f64>) -> Value {
    let used = context_pct.map_or(2_000, |pct| (pct / 100.0 * WINDOW as f64).round() as u64);
    // Most of a long conversation is cache reads; the sum is what the context monitor reads.
    let cache_read = used * 9 / 10;
    json!({
        "input_tokens": used - cache_read,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cache_read,
        "output_tokens": 12,
    })
}

fn has_tool_result(message: &Value) -> bool {
    message["content"]
        .as_array()
        .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"))
}

/// The texts of a message (string content, text blocks, tool results' text), each without
/// `<system-reminder>` blocks.
fn texts_of(message: &Value) -> Vec<String> {
    let mut texts = Vec::new();
    let mut push = |text: &str| {
        let text = without_reminders(text);
        if !text.trim().is_empty() {
            texts.push(text);
        }
    };
    match &message["content"] {
        Value::String(text) => push(text),
        Value::Array(blocks) => {
            for block in blocks {
                match &block["content"] {
                    Value::String(text) => push(text),
                    Value::Array(inner) => inner
                        .iter()
                        .filter_map(|b| b["text"].as_str())
                        .for_each(&mut push),
                    _ => {}
                }
                if let Some(text) = block["text"].as_str() {
                    push(text);
                }
            }
        }
        _ => {}
    }
    texts
}

fn new_text(messages: &[Value]) -> String {
    let from = messages
        .iter()
        .rposition(|m| m["role"] == "assistant")
        .map_or(0, |at| at + 1);
    messages[from..]
        .iter()
        .flat_map(texts_of)
        .collect::<Vec<_>>()
        .join("\n")
}

fn without_reminders(text: &str) -> String {
    const OPEN: &str = "<system-reminder>";
    const CLOSE: &str = "</system-reminder>";
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        out.push_str(&rest[..start]);
        match rest[start..].find(CLOSE) {
            Some(end) => rest = &rest[start + end + CLOSE.len()..],
            None => {
                rest = "";
                break;
            }
        }
    }
    out.push_str(rest);
    out.trim().to_owned()
}

fn decoded(headers: &HeaderMap, body: &[u8]) -> Vec<u8> {
    let gzip = headers
        .get(header::CONTENT_ENCODING)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"));
    if !gzip {
        return body.to_vec();
    }
    let mut out = Vec::new();
    match flate2::read::GzDecoder::new(body).read_to_end(&mut out) {
        Ok(_) => out,
        Err(_) => body.to_vec(),
    }
}

fn json_response(status: StatusCode, value: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

/// `message` as the server-sent events of a streamed answer.
fn stream(message: &Value) -> Response {
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    let mut events = vec![
        (
            "message_start",
            json!({"type": "message_start", "message": start}),
        ),
        ("ping", json!({"type": "ping"})),
    ];
    for (index, block) in message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let (empty, delta) = if block["type"] == "tool_use" {
            let mut empty = block.clone();
            empty["input"] = json!({});
            let partial = block["input"].to_string();
            (
                empty,
                json!({"type": "input_json_delta", "partial_json": partial}),
            )
        } else {
            (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": block["text"]}),
            )
        };
        events.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": empty}),
        ));
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": delta}),
        ));
        events.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    events.push((
        "message_delta",
        json!({
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": null},
            "usage": message["usage"],
        }),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    let text: String = events
        .into_iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect();
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/event-stream")],
        text,
    )
        .into_response()
}

/// The answer at the 5-hour limit until `until_s`: 429 `rate_limit_error` with the unified
/// rate-limit headers (`rejected`, the reset) and no retry.
fn at_limit(until_s: u64) -> Response {
    let reset = until_s.to_string();
    let mut response = json_response(
        StatusCode::TOO_MANY_REQUESTS,
        json!({"type": "error", "error": {"type": "rate_limit_error",
            "message": "This request would exceed your account's rate limit."}}),
    );
    for (name, value) in [
        ("anthropic-ratelimit-unified-status", "rejected"),
        ("anthropic-ratelimit-unified-reset", &reset),
        ("anthropic-ratelimit-unified-5h-reset", &reset),
        (
            "anthropic-ratelimit-unified-representative-claim",
            "five_hour",
        ),
        ("anthropic-ratelimit-unified-5h-utilization", "1.0"),
        ("x-should-retry", "false"),
    ] {
        response
            .headers_mut()
            .insert(name, value.parse().expect("header value"));
    }
    response
}

/// Unix seconds `after` from now.
pub fn unix_in(after: Duration) -> u64 {
    (SystemTime::now() + after)
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}
