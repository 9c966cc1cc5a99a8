//! A stub agent-event-bus for tests: a real HTTP/1.1 server on 127.0.0.1 that answers MCP
//! `tools/call` the way the real (stateless FastMCP) bus does, byte for byte where it matters:
//! 406 unless both Accept types are sent, one SSE event with CRLF line ends, list results under
//! `structuredContent.result` with an empty `content` for an empty list, `isError` results for
//! unknown tools, and in-band `success:false` "Webhook not found".
//!
//! It keeps an in-memory webhook table and records every call. Tests can stop it and start it
//! again on the same port, edit rows behind the client's back, queue canned tool results, or make
//! it answer 500s, garbage, or nothing at all. It is hand-written over `TcpStream` (not axum) so
//! that stopping it really drops every open keep-alive connection, as a dying bus would.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// Requests larger than this are refused; the bridge's calls are a few hundred bytes.
const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// How long `restart` keeps trying to rebind the old port (a just-closed listener can take a
/// moment to release it).
const REBIND_PATIENCE: Duration = Duration::from_secs(3);

/// What the bus does with the next requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Behaviour {
    /// Speak MCP.
    Normal,
    /// Answer every request with this HTTP status and a short text body.
    Status(u16),
    /// Accept the request and never answer.
    Hang,
    /// Answer 200 `text/event-stream` with exactly this body.
    RawBody(String),
}

/// One webhook row as the bus stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StubRow {
    pub webhook_id: i64,
    pub url: String,
    pub channel: Option<String>,
    pub active: bool,
    pub secret: Option<String>,
    pub created_at: String,
}

/// One `tools/call` the bus received.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub name: String,
    pub arguments: Value,
}

/// The transport facts of one request, for asserting what a client sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    pub method: String,
    pub path: String,
    pub accept: Option<String>,
    pub content_type: Option<String>,
}

#[derive(Debug)]
struct BusState {
    rows: Vec<StubRow>,
    next_id: i64,
    calls: Vec<ToolCall>,
    requests: Vec<RequestHead>,
    behaviour: Behaviour,
    scripted: HashMap<String, VecDeque<Value>>,
}

/// A running (or stopped) stub bus. Stops its server when dropped.
pub struct StubBus {
    port: u16,
    state: Arc<Mutex<BusState>>,
    server: Option<JoinHandle<()>>,
}

impl StubBus {
    /// Starts a bus on a free loopback port.
    pub async fn start() -> Self {
        super::timeout::arm_test_timeout();
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port for the stub bus");
        let port = listener.local_addr().expect("local addr").port();
        let state = Arc::new(Mutex::new(BusState {
            rows: Vec::new(),
            next_id: 1,
            calls: Vec::new(),
            requests: Vec::new(),
            behaviour: Behaviour::Normal,
            scripted: HashMap::new(),
        }));
        let server = Some(tokio::spawn(serve(listener, Arc::clone(&state))));
        Self {
            port,
            state,
            server,
        }
    }

    /// The MCP endpoint, `http://127.0.0.1:<port>/mcp`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Closes the listener and every open connection; the table survives, as on disk.
    pub async fn stop(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
            let _ = server.await;
        }
    }

    /// Listens again on the same port.
    pub async fn restart(&mut self) {
        self.stop().await;
        let started = tokio::time::Instant::now();
        let listener = loop {
            match TcpListener::bind(self.addr()).await {
                Ok(listener) => break listener,
                Err(e) if started.elapsed() < REBIND_PATIENCE => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("stub bus could not rebind port {}: {e}", self.port),
            }
        };
        self.server = Some(tokio::spawn(serve(listener, Arc::clone(&self.state))));
    }

    pub fn set_behaviour(&self, behaviour: Behaviour) {
        self.lock().behaviour = behaviour;
    }

    /// Makes the next call of `tool` return `value` (as the tool's own return value, wrapped
    /// in the MCP result shape) instead of doing its work. Queued values are used in order.
    pub fn script(&self, tool: &str, value: Value) {
        self.lock()
            .scripted
            .entry(tool.to_owned())
            .or_default()
            .push_back(value);
    }

    /// Adds a row directly, as another client would; returns its id.
    pub fn insert_row(&self, url: &str, active: bool) -> i64 {
        let mut state = self.lock();
        let id = state.next_id;
        state.next_id += 1;
        state.rows.push(StubRow {
            webhook_id: id,
            url: url.to_owned(),
            channel: Some("session:".to_owned()),
            active,
            secret: None,
            created_at: created_at(id),
        });
        id
    }

    /// Deletes a row behind the client's back (manual surgery, DB restore).
    pub fn delete_row(&self, id: i64) -> bool {
        let mut state = self.lock();
        let before = state.rows.len();
        state.rows.retain(|row| row.webhook_id != id);
        state.rows.len() != before
    }

    /// Pauses or resumes a row, as `set_webhook_active` does.
    pub fn set_active(&self, id: i64, active: bool) -> bool {
        let mut state = self.lock();
        match state.rows.iter_mut().find(|row| row.webhook_id == id) {
            Some(row) => {
                row.active = active;
                true
            }
            None => false,
        }
    }

    pub fn rows(&self) -> Vec<StubRow> {
        self.lock().rows.clone()
    }

    /// Rows whose URL is exactly `url`.
    pub fn rows_at(&self, url: &str) -> Vec<StubRow> {
        self.rows().into_iter().filter(|r| r.url == url).collect()
    }

    pub fn calls(&self) -> Vec<ToolCall> {
        self.lock().calls.clone()
    }

    /// Calls of one tool, in order.
    pub fn calls_of(&self, tool: &str) -> Vec<Value> {
        self.calls()
            .into_iter()
            .filter(|c| c.name == tool)
            .map(|c| c.arguments)
            .collect()
    }

    pub fn requests(&self) -> Vec<RequestHead> {
        self.lock().requests.clone()
    }

    fn lock(&self) -> MutexGuard<'_, BusState> {
        lock(&self.state)
    }
}

impl Drop for StubBus {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
        }
    }
}

fn lock(state: &Mutex<BusState>) -> MutexGuard<'_, BusState> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn created_at(id: i64) -> String {
    format!("2026-11-30T12:00:{:02}", id % 60)
}

/// Accepts connections; each runs in a set owned by this task, so aborting it closes them all.
async fn serve(listener: TcpListener, state: Arc<Mutex<BusState>>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    connections.spawn(serve_connection(stream, Arc::clone(&state)));
                }
            }
            Some(_) = connections.join_next() => {}
        }
    }
}

struct Request {
    head: RequestHead,
    body: Vec<u8>,
    close: bool,
}

struct Response {
    status: u16,
    content_type: &'static str,
    body: String,
    extra_headers: Vec<(&'static str, String)>,
    /// SSE replies go out chunked like the real bus's; everything else with a length.
    chunked: bool,
}

impl Response {
    fn text(status: u16, body: &str) -> Self {
        Self {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.to_owned(),
            extra_headers: Vec::new(),
            chunked: false,
        }
    }

    fn json(status: u16, body: Value) -> Self {
        Self {
            status,
            content_type: "application/json",
            body: body.to_string(),
            extra_headers: Vec::new(),
            chunked: false,
        }
    }

    fn sse_raw(body: String) -> Self {
        Self {
            status: 200,
            content_type: "text/event-stream",
            body,
            extra_headers: Vec::new(),
            chunked: true,
        }
    }

    fn sse(envelope: Value) -> Self {
        Self::sse_raw(format!("event: message\r\ndata: {envelope}\r\n\r\n"))
    }
}

async fn serve_connection(stream: TcpStream, state: Arc<Mutex<BusState>>) {
    let mut stream = BufReader::new(stream);
    loop {
        let Some(request) = read_request(&mut stream).await else {
            return;
        };
        let behaviour = {
            let mut guard = lock(&state);
            guard.requests.push(request.head.clone());
            guard.behaviour.clone()
        };
        let response = match behaviour {
            Behaviour::Hang => std::future::pending::<Response>().await,
            Behaviour::Status(status) => Response::text(status, "stub bus failure"),
            Behaviour::RawBody(body) => Response::sse_raw(body),
            Behaviour::Normal => handle(&request, &state),
        };
        if write_response(stream.get_mut(), &response).await.is_err() || request.close {
            return;
        }
    }
}

async fn read_request(stream: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    stream.read_line(&mut line).await.ok().filter(|n| *n > 0)?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let path = parts.next()?.to_owned();
    let mut headers: HashMap<String, String> = HashMap::new();
    loop {
        line.clear();
        stream.read_line(&mut line).await.ok().filter(|n| *n > 0)?;
        let trimmed = line.trim_end_matches(['\r', '\n']);
        if trimmed.is_empty() {
            break;
        }
        let (name, value) = trimmed.split_once(':')?;
        headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
    }
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if length > MAX_REQUEST_BYTES {
        return None;
    }
    let mut body = vec![0; length];
    stream.read_exact(&mut body).await.ok()?;
    let close = headers
        .get("connection")
        .is_some_and(|v| v.eq_ignore_ascii_case("close"));
    Some(Request {
        head: RequestHead {
            method,
            path,
            accept: headers.get("accept").cloned(),
            content_type: headers.get("content-type").cloned(),
        },
        body,
        close,
    })
}

async fn write_response(stream: &mut TcpStream, response: &Response) -> std::io::Result<()> {
    let reason = match response.status {
        200 => "OK",
        307 => "Temporary Redirect",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        500 => "Internal Server Error",
        _ => "Status",
    };
    let mut head = format!(
        "HTTP/1.1 {} {reason}\r\ncontent-type: {}\r\n",
        response.status, response.content_type
    );
    for (name, value) in &response.extra_headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    let body = response.body.as_bytes();
    if response.chunked {
        head.push_str("transfer-encoding: chunked\r\n\r\n");
        head.push_str(&format!("{:x}\r\n", body.len()));
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body).await?;
        stream.write_all(b"\r\n0\r\n\r\n").await?;
    } else {
        head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body).await?;
    }
    stream.flush().await
}

/// The transport checks of FastMCP's stateless streamable HTTP app (2.14.4, the strict one),
/// then JSON-RPC dispatch.
fn handle(request: &Request, state: &Mutex<BusState>) -> Response {
    match (request.head.method.as_str(), request.head.path.as_str()) {
        ("POST", "/mcp") => {}
        (_, "/mcp/") => {
            let mut redirect = Response::text(307, "");
            redirect.extra_headers.push(("location", "/mcp".to_owned()));
            return redirect;
        }
        (_, "/mcp") => return Response::text(405, "Method Not Allowed"),
        _ => return Response::text(404, "Not Found"),
    }
    let accept = request.head.accept.as_deref().unwrap_or("");
    if !(accept.contains("application/json") && accept.contains("text/event-stream")) {
        return Response::json(
            406,
            json!({"jsonrpc":"2.0","id":"server-error","error":{"code":-32600,
                "message":"Not Acceptable: Client must accept both application/json and text/event-stream"}}),
        );
    }
    let content_type = request.head.content_type.as_deref().unwrap_or("");
    if !content_type.starts_with("application/json") {
        return Response::text(400, "Invalid Content-Type header");
    }
    let Ok(message) = serde_json::from_slice::<Value>(&request.body) else {
        return Response::json(
            400,
            json!({"jsonrpc":"2.0","id":"server-error","error":{"code":-32700,"message":"Parse error"}}),
        );
    };
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    match message.get("method").and_then(Value::as_str) {
        Some("tools/call") => {
            let params = message.get("params").cloned().unwrap_or(Value::Null);
            let name = params
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
            let result = call_tool(state, &name, arguments);
            Response::sse(json!({"jsonrpc":"2.0","id":id,"result":result}))
        }
        Some("initialize") => Response::sse(json!({"jsonrpc":"2.0","id":id,"result":{
            "protocolVersion":"2025-06-18","capabilities":{"tools":{}},
            "serverInfo":{"name":"agent-event-bus","version":"stub"}}})),
        _ => Response::sse(json!({"jsonrpc":"2.0","id":id,
            "error":{"code":-32601,"message":"Method not found"}})),
    }
}

/// The tool's return value in FastMCP's result shape.
fn tool_result(value: Value) -> Value {
    match value {
        Value::Array(items) => {
            let content = if items.is_empty() {
                json!([])
            } else {
                json!([{"text": Value::Array(items.clone()).to_string(), "type": "text"}])
            };
            json!({"content": content, "structuredContent": {"result": items},
                "isError": false, "_meta": {"fastmcp": {"wrap_result": true}}})
        }
        other => json!({"content":[{"text": other.to_string(), "type": "text"}],
            "structuredContent": other, "isError": false}),
    }
}

fn tool_error(message: &str) -> Value {
    json!({"content":[{"text": message, "type": "text"}], "isError": true})
}

fn call_tool(state: &Mutex<BusState>, name: &str, arguments: Value) -> Value {
    let mut state = lock(state);
    state.calls.push(ToolCall {
        name: name.to_owned(),
        arguments: arguments.clone(),
    });
    if let Some(value) = state.scripted.get_mut(name).and_then(VecDeque::pop_front) {
        return tool_result(value);
    }
    let id_arg = arguments.get("webhook_id").and_then(Value::as_i64);
    match name {
        "list_webhooks" => {
            let active_only = arguments
                .get("active_only")
                .and_then(Value::as_bool)
                .unwrap_or(true);
            let rows: Vec<Value> = state
                .rows
                .iter()
                .rev() // newest first, like the bus
                .filter(|row| row.active || !active_only)
                .map(|row| {
                    json!({"webhook_id": row.webhook_id, "url": row.url, "channel": row.channel,
                        "event_types": null, "active": row.active, "created_at": row.created_at,
                        "has_secret": row.secret.is_some()})
                })
                .collect();
            tool_result(Value::Array(rows))
        }
        "register_webhook" => {
            let Some(url) = arguments.get("url").and_then(Value::as_str) else {
                return tool_error(
                    "1 validation error for call[register_webhook]\nurl\n  Missing required argument",
                );
            };
            let id = state.next_id;
            state.next_id += 1;
            let row = StubRow {
                webhook_id: id,
                url: url.to_owned(),
                channel: arguments
                    .get("channel")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                active: true,
                secret: arguments
                    .get("secret")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                created_at: created_at(id),
            };
            let reply = json!({"webhook_id": id, "url": row.url, "channel": row.channel,
                "event_types": null, "created_at": row.created_at});
            state.rows.push(row);
            tool_result(reply)
        }
        "unregister_webhook" => {
            let before = state.rows.len();
            state.rows.retain(|row| Some(row.webhook_id) != id_arg);
            if state.rows.len() != before {
                tool_result(json!({"success": true, "webhook_id": id_arg}))
            } else {
                tool_result(
                    json!({"success": false, "error": "Webhook not found", "webhook_id": id_arg}),
                )
            }
        }
        "set_webhook_active" => {
            let active = arguments
                .get("active")
                .and_then(Value::as_bool)
                .unwrap_or(true);
            match state
                .rows
                .iter_mut()
                .find(|row| Some(row.webhook_id) == id_arg)
            {
                Some(row) => {
                    row.active = active;
                    tool_result(json!({"success": true, "webhook_id": id_arg, "active": active}))
                }
                None => tool_result(
                    json!({"success": false, "error": "Webhook not found", "webhook_id": id_arg}),
                ),
            }
        }
        "publish_event" => tool_result(json!({"event_id": state.calls.len(), "success": true})),
        other => tool_error(&format!("Unknown tool: '{other}'")),
    }
}
