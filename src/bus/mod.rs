//! The agent-event-bus MCP client: one `tools/call` over streamable HTTP, unwrapping the bus's
//! replies, and the three webhook tools. It owns the wire shape only; every failure is a
//! [`BusError`] saying what kind it was.

pub mod registration;
use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde_json::{Value, json};

use crate::config::UrlProblem;
use crate::wire::json_kind;

/// Per-call budget, the reference bridge's: a healthy bus answers in ~5 ms.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Streamable HTTP (FastMCP) answers 406 unless the client accepts both media types.
pub const ACCEPT_BOTH: &str = "application/json, text/event-stream";

/// Our webhook's channel filter: direct messages to sessions only.
pub const SESSION_CHANNEL: &str = "session:";

/// The in-band error for an id that no longer exists: as good as a removal.
pub const WEBHOOK_NOT_FOUND: &str = "Webhook not found";

/// Largest reply buffered before a `data:` line: a listing is a few KiB; more is not MCP.
const MAX_REPLY_BYTES: usize = 8 * 1024 * 1024;

/// How much of an HTTP error body is quoted: enough for FastMCP's one-line reasons.
const MAX_ERROR_BODY_CHARS: usize = 300;

/// What went wrong talking to the bus, told apart so callers can log the right remedy.
#[derive(Debug, thiserror::Error)]
pub enum BusError {
    #[error("invalid bus URL {url:?}: {problem}; expected http(s)://host[:port]/mcp")]
    InvalidUrl {
        url: String,
        #[source]
        problem: UrlProblem,
    },
    #[error("could not build the HTTP client for the bus: {0}")]
    Client(#[source] reqwest::Error),
    #[error("bus not reachable at {url}: {detail}; is agent-event-bus running?")]
    Unreachable { url: String, detail: String },
    #[error("bus at {url} answered HTTP {status} to {tool}: {body}")]
    Http {
        url: String,
        tool: String,
        status: u16,
        body: String,
    },
    #[error("bus tool {tool} failed: {message}")]
    ToolError { tool: String, message: String },
    #[error("bus tool {tool} refused: {error}")]
    Refused { tool: String, error: String },
    #[error("unusable reply from bus tool {tool}: {reason}")]
    Unusable { tool: String, reason: String },
}

impl BusError {
    pub fn is_unreachable(&self) -> bool {
        matches!(self, BusError::Unreachable { .. })
    }

    fn refused(tool: &str, error: String) -> Self {
        BusError::Refused {
            tool: tool.to_owned(),
            error,
        }
    }

    pub(crate) fn unusable(tool: &str, reason: String) -> Self {
        BusError::Unusable {
            tool: tool.to_owned(),
            reason,
        }
    }
}

/// One row of `list_webhooks`, read leniently: an odd field is `None`, not a refused listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookRow {
    pub webhook_id: Option<i64>,
    pub url: Option<String>,
    /// Paused rows read `false`; a missing flag (an older bus) `true`.
    pub active: bool,
    pub has_secret: bool,
}

impl WebhookRow {
    pub fn from_value(value: &Value) -> Option<Self> {
        let row = value.as_object()?;
        let flag = |key: &str, missing| row.get(key).and_then(Value::as_bool).unwrap_or(missing);
        Some(Self {
            webhook_id: row.get("webhook_id").and_then(Value::as_i64),
            url: row.get("url").and_then(Value::as_str).map(str::to_owned),
            active: flag("active", true),
            has_secret: flag("has_secret", false),
        })
    }
}

/// A client for one bus MCP endpoint. Cheap to clone (the connection pool is shared).
#[derive(Debug, Clone)]
pub struct BusClient {
    url: reqwest::Url,
    http: reqwest::Client,
}

impl BusClient {
    /// A client that POSTs to exactly `url` (no slash appended) with a [`CALL_TIMEOUT`] budget.
    pub fn new(url: &str) -> Result<Self, BusError> {
        Self::with_timeout(url, CALL_TIMEOUT)
    }

    pub fn with_timeout(url: &str, timeout: Duration) -> Result<Self, BusError> {
        let invalid = |problem| BusError::InvalidUrl {
            url: url.to_owned(),
            problem,
        };
        let parsed = reqwest::Url::parse(url).map_err(|e| invalid(UrlProblem::Parse(e)))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(invalid(UrlProblem::Scheme(parsed.scheme().to_owned())));
        }
        if parsed.host_str().is_none_or(str::is_empty) {
            return Err(invalid(UrlProblem::NoHost));
        }
        let http = crate::http_client(timeout).map_err(BusError::Client)?;
        Ok(Self { url: parsed, http })
    }

    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<Value, BusError> {
        let body = json!({
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        });
        let mut response = self
            .http
            .post(self.url.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, ACCEPT_BOTH)
            .body(body.to_string())
            .send()
            .await
            .map_err(|e| self.transport_error(name, &e))?;
        let status = response.status();
        if !status.is_success() {
            return Err(BusError::Http {
                url: self.url.to_string(),
                tool: name.to_owned(),
                status: status.as_u16(),
                body: read_error_body(&mut response).await,
            });
        }
        let data = self.read_first_data_line(name, &mut response).await?;
        let envelope: Value = serde_json::from_str(&data)
            .map_err(|e| BusError::unusable(name, format!("data line is not JSON ({e})")))?;
        unwrap_tool_result(name, envelope)
    }

    /// Every webhook row, paused ones included (the sweep must see them).
    pub async fn list_webhooks(&self) -> Result<Vec<WebhookRow>, BusError> {
        const TOOL: &str = "list_webhooks";
        match self.call_tool(TOOL, json!({"active_only": false})).await? {
            Value::Array(items) => Ok(items.iter().filter_map(WebhookRow::from_value).collect()),
            other => Err(refused_or_unusable(TOOL, &other, || {
                format!("expected a list of webhooks, got {}", json_kind(&other))
            })),
        }
    }

    /// Registers `url` on `channel`; returns the new id.
    pub async fn register_webhook(
        &self,
        url: &str,
        channel: &str,
        secret: Option<&str>,
    ) -> Result<i64, BusError> {
        const TOOL: &str = "register_webhook";
        let mut arguments = json!({"url": url, "channel": channel});
        if let Some(secret) = secret {
            arguments["secret"] = Value::from(secret);
        }
        let result = self.call_tool(TOOL, arguments).await?;
        let id = result.get("webhook_id").and_then(Value::as_i64);
        id.ok_or_else(|| {
            refused_or_unusable(TOOL, &result, || {
                format!("no webhook_id in {}", clip(&result.to_string()))
            })
        })
    }

    /// Removes webhook `id`. An id the bus no longer knows counts as removed.
    pub async fn unregister_webhook(&self, id: i64) -> Result<(), BusError> {
        const TOOL: &str = "unregister_webhook";
        let result = self.call_tool(TOOL, json!({"webhook_id": id})).await?;
        if result.get("success").is_some_and(is_truthy) {
            return Ok(());
        }
        match result.get("error").and_then(Value::as_str) {
            Some(WEBHOOK_NOT_FOUND) => Ok(()),
            Some(error) => Err(BusError::refused(
                TOOL,
                format!("unexpected result for #{id}: {error}"),
            )),
            None => Err(BusError::unusable(
                TOOL,
                format!("unexpected result for #{id}: {}", clip(&result.to_string())),
            )),
        }
    }

    fn transport_error(&self, tool: &str, e: &reqwest::Error) -> BusError {
        if e.is_connect() || e.is_timeout() {
            let detail = if e.is_timeout() {
                format!("no answer to {tool} within the call timeout")
            } else {
                format!("cannot connect ({})", error_chain(e))
            };
            BusError::Unreachable {
                url: self.url.to_string(),
                detail,
            }
        } else {
            BusError::unusable(tool, format!("request failed: {}", error_chain(e)))
        }
    }

    /// Reads the body only as far as the first complete `data:` line.
    async fn read_first_data_line(
        &self,
        tool: &str,
        response: &mut reqwest::Response,
    ) -> Result<String, BusError> {
        let unusable = |reason| BusError::unusable(tool, reason);
        let mut buffer: Vec<u8> = Vec::new();
        loop {
            let chunk = response.chunk().await.map_err(|e| {
                if e.is_timeout() {
                    self.transport_error(tool, &e)
                } else {
                    unusable(format!("reply broke off: {}", error_chain(&e)))
                }
            })?;
            let finished = chunk.is_none();
            if let Some(bytes) = chunk {
                buffer.extend_from_slice(&bytes);
            }
            // Only complete lines count until the stream ends; then the tail counts too.
            let complete = if finished {
                buffer.len()
            } else {
                buffer.iter().rposition(|b| *b == b'\n').unwrap_or(0)
            };
            let text = std::str::from_utf8(&buffer[..complete])
                .map_err(|e| unusable(format!("reply is not UTF-8 ({e})")))?;
            if let Some(data) = first_data_line(text) {
                return Ok(data.to_owned());
            }
            if finished {
                return Err(unusable("no `data:` line in the reply".to_owned()));
            }
            if buffer.len() > MAX_REPLY_BYTES {
                return Err(unusable(format!(
                    "more than {MAX_REPLY_BYTES} bytes without a `data:` line"
                )));
            }
        }
    }
}

/// The payload of the first SSE `data:` line (one optional space after the colon is syntax).
pub fn first_data_line(sse: &str) -> Option<&str> {
    sse.split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
        .find_map(|line| line.strip_prefix("data:"))
        .map(|rest| rest.strip_prefix(' ').unwrap_or(rest))
}

/// Unwraps a `tools/call` envelope as the bus shapes it: `structuredContent.result` when not
/// null (lists), else `structuredContent` (dicts), else `content[0].text` parsed as JSON.
pub fn unwrap_tool_result(tool: &str, envelope: Value) -> Result<Value, BusError> {
    let unusable = |reason| BusError::unusable(tool, reason);
    let Value::Object(mut envelope) = envelope else {
        return Err(unusable(format!(
            "expected a JSON-RPC object, got {}",
            json_kind(&envelope)
        )));
    };
    if let Some(error) = envelope.get("error") {
        let code = error.get("code").map(Value::to_string).unwrap_or_default();
        let message = error["message"].as_str().unwrap_or("(no message)");
        return Err(unusable(format!("JSON-RPC error {code}: {message}")));
    }
    let Some(Value::Object(mut result)) = envelope.remove("result") else {
        return Err(unusable("no `result` object in the reply".to_owned()));
    };
    if result.get("isError").is_some_and(is_truthy) {
        let items = result.get("content").and_then(Value::as_array);
        let texts = items.into_iter().flatten().flat_map(|i| i["text"].as_str());
        let message = texts.collect::<Vec<_>>().join("\n");
        return Err(BusError::ToolError {
            tool: tool.to_owned(),
            message: Some(message)
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| "(no message)".to_owned()),
        });
    }
    match result.remove("structuredContent") {
        Some(Value::Object(mut structured)) => {
            return Ok(match structured.get_mut("result") {
                Some(inner) if !inner.is_null() => inner.take(),
                _ => Value::Object(structured),
            });
        }
        Some(Value::Null) | None => {}
        Some(other) => return Ok(other),
    }
    let text = result.get("content").and_then(|c| c[0]["text"].as_str());
    let text = text.ok_or_else(|| unusable("neither structuredContent nor text content".into()))?;
    serde_json::from_str(text)
        .map_err(|e| unusable(format!("text content is not JSON ({e}): {}", clip(text))))
}

/// Python truthiness, which is what the bus's own client applies to `success`.
pub fn is_truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// The bus's in-band `{"error": ..}` as a refusal, else `reason` as an unusable reply.
fn refused_or_unusable(tool: &str, result: &Value, reason: impl FnOnce() -> String) -> BusError {
    match result.get("error") {
        Some(Value::String(error)) => BusError::refused(tool, error.clone()),
        Some(error) => BusError::refused(tool, error.to_string()),
        None => BusError::unusable(tool, reason()),
    }
}

fn clip(text: &str) -> String {
    match text.char_indices().nth(MAX_ERROR_BODY_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// reqwest's top-level message is often just "error sending request"; the cause chain says why.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let causes = std::iter::successors(Some(e), |e| e.source());
    causes
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ")
}

async fn read_error_body(response: &mut reqwest::Response) -> String {
    let mut buffer = Vec::new();
    while buffer.len() < MAX_ERROR_BODY_CHARS * 4 {
        match response.chunk().await {
            Ok(Some(bytes)) => buffer.extend_from_slice(&bytes),
            Ok(None) | Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&buffer);
    let text = text.trim();
    if text.is_empty() {
        "(empty body)".to_owned()
    } else {
        clip(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_data_line_reads_crlf_and_lf_streams() {
        let crlf = "event: message\r\ndata: {\"a\":1}\r\n\r\n";
        assert_eq!(first_data_line(crlf), Some("{\"a\":1}"));
        let lf = "event: message\ndata: [1]\n\ndata: [2]\n";
        assert_eq!(first_data_line(lf), Some("[1]"));
        assert_eq!(first_data_line("data:{}"), Some("{}"));
        assert_eq!(first_data_line("event: message\r\n\r\n"), None);
        assert_eq!(first_data_line(""), None);
    }

    #[test]
    fn list_results_unwrap_from_structured_result() {
        let envelope = json!({"jsonrpc":"2.0","id":1,"result":{
            "content": [], "structuredContent": {"result": []}, "isError": false}});
        assert_eq!(unwrap_tool_result("t", envelope).ok(), Some(json!([])));
    }

    #[test]
    fn dict_results_unwrap_from_structured_content() {
        let envelope = json!({"result":{
            "content":[{"type":"text","text":"{\"webhook_id\":3}"}],
            "structuredContent":{"webhook_id":3}}});
        assert_eq!(
            unwrap_tool_result("t", envelope).ok(),
            Some(json!({"webhook_id":3}))
        );
    }

    #[test]
    fn null_structured_result_keeps_the_structured_dict() {
        let envelope = json!({"result":{"structuredContent":{"result":null,"x":1}}});
        assert_eq!(
            unwrap_tool_result("t", envelope).ok(),
            Some(json!({"result":null,"x":1}))
        );
    }

    #[test]
    fn text_content_is_parsed_when_nothing_is_structured() {
        let envelope = json!({"result":{"content":[{"type":"text","text":"{\"ok\":true}"}]}});
        assert_eq!(
            unwrap_tool_result("t", envelope).ok(),
            Some(json!({"ok":true}))
        );
    }

    #[test]
    fn is_error_results_are_tool_errors() {
        let envelope = json!({"result":{
            "content":[{"text":"Unknown tool: 'nope'","type":"text"}],"isError":true}});
        match unwrap_tool_result("nope", envelope) {
            Err(BusError::ToolError { message, .. }) => {
                assert_eq!(message, "Unknown tool: 'nope'");
            }
            other => panic!("expected a tool error, got {other:?}"),
        }
    }

    #[test]
    fn json_rpc_errors_and_missing_results_are_unusable() {
        let error = json!({"jsonrpc":"2.0","id":"server-error",
            "error":{"code":-32600,"message":"Not Acceptable"}});
        assert!(matches!(
            unwrap_tool_result("t", error),
            Err(BusError::Unusable { reason, .. }) if reason.contains("Not Acceptable")
        ));
        assert!(matches!(
            unwrap_tool_result("t", json!({"jsonrpc":"2.0","id":1})),
            Err(BusError::Unusable { .. })
        ));
        assert!(matches!(
            unwrap_tool_result("t", json!({"result":{"content":[{"text":"not json"}]}})),
            Err(BusError::Unusable { .. })
        ));
        assert!(matches!(
            unwrap_tool_result("t", json!([1])),
            Err(BusError::Unusable { .. })
        ));
    }

    #[test]
    fn truthiness_follows_python() {
        for (value, truthy) in [
            (json!(true), true),
            (json!(1), true),
            (json!("x"), true),
            (json!([0]), true),
            (json!(false), false),
            (json!(0), false),
            (json!(""), false),
            (json!({}), false),
            (json!(null), false),
        ] {
            assert_eq!(is_truthy(&value), truthy, "{value}");
        }
    }

    #[test]
    fn webhook_rows_are_read_leniently() {
        let row = WebhookRow::from_value(&json!({
            "webhook_id": 7, "url": "http://127.0.0.1:8082/hook", "channel": "session:",
            "event_types": null, "active": false, "has_secret": true,
            "created_at": "2026-01-01T00:00:00"}));
        let row = row.expect("an object is a row");
        assert_eq!(row.webhook_id, Some(7));
        assert!(!row.active);
        assert!(row.has_secret);
        let sparse = WebhookRow::from_value(&json!({"webhook_id": null}));
        assert_eq!(sparse.map(|r| (r.webhook_id, r.active)), Some((None, true)));
        assert_eq!(WebhookRow::from_value(&json!("garbage")), None);
    }

    #[test]
    fn new_rejects_urls_that_are_not_http() {
        assert!(matches!(
            BusClient::new("ftp://bus/mcp"),
            Err(BusError::InvalidUrl { .. })
        ));
        assert!(matches!(
            BusClient::new("not a url"),
            Err(BusError::InvalidUrl { .. })
        ));
        let client = BusClient::new("http://127.0.0.1:8080/mcp").expect("valid");
        assert_eq!(client.url.as_str(), "http://127.0.0.1:8080/mcp");
    }
}
