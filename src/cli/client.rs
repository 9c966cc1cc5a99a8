//! The CLI verbs that talk to a running daemon over HTTP (`wakebridge wake`, `rewind`,
//! `status`): where the daemon listens (from the same configuration `serve` reads), the bearer
//! secret, and turning answers into exit codes and text.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Value, json};

use crate::config::Config;
use crate::http::status::{SessionStatus, render_table};

#[derive(Debug, clap::Args)]
pub struct WakeArgs {
    /// The bus session id to wake.
    session_id: String,
    /// Skip the busy marker and the cooldown (never the pane mapping, the stale-pane guard, or
    /// the check for text already at the prompt).
    #[arg(long)]
    force: bool,
    /// Type this configured message ([wake.messages]) instead of the wake prompt.
    #[arg(long, value_name = "NAME")]
    message: Option<String>,
    /// The daemon's base URL [default: from the configuration, e.g. http://127.0.0.1:8082]
    #[arg(long)]
    url: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct RewindArgs {
    /// The session to rewind [default: $AGENT_EVENT_BUS_SESSION_ID, then $CLAUDE_CODE_SESSION_ID,
    /// as inside the session]
    #[arg(long, value_name = "ID")]
    session_id: Option<String>,
    /// Start the agent again in its pane (first-run screens passed, the re-hydration prompt as
    /// its first prompt) instead of `/clear`; revives an agent whose pane or tmux server died
    #[arg(long)]
    restart: bool,
    /// The daemon's base URL [default: from the configuration, e.g. http://127.0.0.1:8082]
    #[arg(long)]
    url: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Print the raw JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// The daemon's base URL [default: from the configuration, e.g. http://127.0.0.1:8082]
    #[arg(long)]
    url: Option<String>,
}

/// How long a CLI call may wait for the daemon (a wake takes at most ~3.6 s).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// `http://<host>:<port>` of the local daemon, from the configuration `serve` would use.
pub(super) fn daemon_url(config: &Config, explicit: Option<&str>) -> String {
    if let Some(url) = explicit {
        return url.trim_end_matches('/').to_string();
    }
    let ip = config.bind_addr();
    let host = if ip.is_unspecified() {
        "127.0.0.1".to_string()
    } else if ip.is_ipv6() {
        format!("[{ip}]")
    } else {
        ip.to_string()
    };
    format!("http://{host}:{}", config.port)
}

/// Why a call got no answer from the daemon.
#[derive(Debug, thiserror::Error)]
pub(super) enum CallError {
    #[error(transparent)]
    Runtime(std::io::Error),
    #[error(transparent)]
    Client(reqwest::Error),
    #[error(
        "cannot reach the wakebridge daemon at {url}: {source}; is `wakebridge serve` running? \
         (--url to point elsewhere)"
    )]
    Unreachable { url: String, source: reqwest::Error },
}

/// Calls the daemon and returns its 200 answer; anything else is printed as `wakebridge <verb>:
/// ...` and is `None` (the caller exits 2).
fn call(
    config: &Config,
    verb: &str,
    method: reqwest::Method,
    url: &str,
    body: Option<Value>,
) -> Option<Value> {
    match request(config, method, url, body) {
        Ok((200, answer)) => Some(answer),
        Ok((status, answer)) => {
            crate::errln!(
                "wakebridge {verb}: {status}: {}",
                answer["error"].as_str().unwrap_or("unexpected answer")
            );
            None
        }
        Err(e) => {
            crate::errln!("wakebridge {verb}: {e}");
            None
        }
    }
}

pub(super) fn request(
    config: &Config,
    method: reqwest::Method,
    url: &str,
    body: Option<Value>,
) -> Result<(u16, Value), CallError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CallError::Runtime)?;
    runtime.block_on(async {
        let client = reqwest::Client::builder()
            .timeout(CALL_TIMEOUT)
            .build()
            .map_err(CallError::Client)?;
        let mut request = client.request(method, url);
        if let Some(secret) = &config.secret {
            request = request.bearer_auth(secret.expose());
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request
            .send()
            .await
            .map_err(|source| CallError::Unreachable {
                url: url.to_string(),
                source,
            })?;
        let status = response.status().as_u16();
        let value = response.json::<Value>().await.unwrap_or(Value::Null);
        Ok((status, value))
    })
}

/// `wakebridge wake SESSION_ID [--force] [--message NAME]`.
pub fn wake(config: &Config, args: &WakeArgs) -> ExitCode {
    let session_id = &args.session_id;
    let mut body = json!({"session_id": session_id, "force": args.force});
    if let Some(name) = &args.message {
        body["message"] = json!(name);
    }
    let url = format!("{}/wake", daemon_url(config, args.url.as_deref()));
    let Some(answer) = call(config, "wake", reqwest::Method::POST, &url, Some(body)) else {
        return ExitCode::from(2);
    };
    let action = answer["action"].as_str().unwrap_or("?");
    crate::outln!("{session_id}: {action}");
    if matches!(action, "tmux" | "zellij") {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// `wakebridge rewind [--session-id ID]`: asks the daemon for a rewind and returns at once.
pub fn rewind(config: &Config, args: &RewindArgs) -> ExitCode {
    let env = crate::env::Env::process();
    let Some(session_id) =
        crate::cli::session::resolve_session_id(args.session_id.as_deref(), &env)
    else {
        crate::errln!(
            "wakebridge rewind: no session id: pass --session-id, or run it inside the session \
             (AGENT_EVENT_BUS_SESSION_ID or CLAUDE_CODE_SESSION_ID)"
        );
        return ExitCode::from(2);
    };
    let url = format!("{}/rewind", daemon_url(config, args.url.as_deref()));
    let body = json!({"session_id": session_id, "restart": args.restart});
    let Some(answer) = call(config, "rewind", reqwest::Method::POST, &url, Some(body)) else {
        return ExitCode::from(2);
    };
    let current = answer["session_id"].as_str().unwrap_or(&session_id);
    match answer["status"].as_str() {
        Some("already-asked") => crate::outln!("{current}: a rewind is already waiting"),
        _ if args.restart => crate::outln!(
            "{current}: restart asked for; at its next idle moment the agent is started again in its pane"
        ),
        _ => crate::outln!(
            "{current}: rewind asked for; at its next idle moment: /clear, then the re-hydration prompt"
        ),
    }
    ExitCode::SUCCESS
}

/// `wakebridge status [--json]`.
pub fn status(config: &Config, args: &StatusArgs) -> ExitCode {
    let url = format!("{}/sessions", daemon_url(config, args.url.as_deref()));
    let Some(answer) = call(config, "status", reqwest::Method::GET, &url, None) else {
        return ExitCode::from(2);
    };
    if args.json {
        crate::outln!(
            "{}",
            serde_json::to_string_pretty(&answer).unwrap_or_default()
        );
        return ExitCode::SUCCESS;
    }
    let sessions: Vec<SessionStatus> =
        serde_json::from_value(answer["sessions"].clone()).unwrap_or_default();
    let table = render_table(&sessions, std::io::stdout().is_terminal());
    crate::outln!("{}", table.trim_end_matches('\n'));
    ExitCode::SUCCESS
}
