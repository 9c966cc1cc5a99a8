//! The owed-wake rig several test files share: the daemon in process with the mux backend on a
//! private tmux server, and the scripted agent (or the real Claude Code) in a pane mapped to
//! [`SID`], firing the real `wakebridge hook`; and waits on that session's `/sessions` entry.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use wakebridge::wakedir::target::PaneTarget;

use super::agent::Agent;
use super::env::test_env;
use super::harness::TestServer;
use super::tmux::TmuxServer;

/// Longest wait for something the daemon or the agent should do within a few polls (or, for
/// the real Claude Code, within a `/clear` and a prompt on a loaded machine).
pub const WAIT: Duration = Duration::from_secs(15);
pub const SID: &str = "owed-session";

/// The daemon's settings: the default nudger poll (10 s), so the owed wakes here are found by
/// the gate's note and the one-second polls while something is owed.
pub fn daemon_env(tmux: &TmuxServer) -> Vec<(&'static str, String)> {
    vec![
        ("AGENT_EVENT_BUS_BRIDGE_BACKEND", "mux".into()),
        ("AGENT_EVENT_BUS_BRIDGE_COOLDOWN", "0".into()),
        (
            "WAKEBRIDGE_MUX__TMUX_SOCKET",
            tmux.socket().display().to_string(),
        ),
        ("WAKEBRIDGE_MUX__SUBMIT_DELAY", "100ms".into()),
        ("WAKEBRIDGE_WAKE__OWED_AFTER", "500ms".into()),
        ("WAKEBRIDGE_CONTEXT__ENABLED", "false".into()),
    ]
}

pub async fn start_daemon(
    tmux: &TmuxServer,
    root: Option<std::sync::Arc<tempfile::TempDir>>,
) -> TestServer {
    start_daemon_with(tmux, root, &[]).await
}

/// [`start_daemon`] with `extra` settings laid over [`daemon_env`]'s.
pub async fn start_daemon_with(
    tmux: &TmuxServer,
    root: Option<std::sync::Arc<tempfile::TempDir>>,
    extra: &[(&'static str, &str)],
) -> TestServer {
    let mut env = daemon_env(tmux);
    env.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    match root {
        Some(root) => TestServer::start_in(root, &env, Default::default()).await,
        None => TestServer::start(&env).await,
    }
}

/// The agent's environment: the daemon's private HOME, state and wake dir (so `wakebridge hook`
/// finds the same ledger), and, with `hooks`, the hook command it fires.
pub fn agent_env(root: &Path, hooks: bool) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = test_env(root, &[]).into_iter().collect();
    env.push(("FAKE_AGENT_SESSION".into(), SID.into()));
    if hooks {
        let hook = format!("{} hook", env!("CARGO_BIN_EXE_wakebridge"));
        env.push(("FAKE_AGENT_HOOK".into(), hook));
    }
    env
}

pub fn spawn_agent(tmux: &TmuxServer, server: &TestServer, mode: &str, hooks: bool) -> Agent {
    spawn_agent_in(tmux, server, mode, &agent_env(server.root.path(), hooks))
}

/// [`spawn_agent`] with the agent's environment as given.
pub fn spawn_agent_in(
    tmux: &TmuxServer,
    server: &TestServer,
    mode: &str,
    env: &[(String, String)],
) -> Agent {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let agent = Agent::spawn_with(tmux, "agent", mode, &env, None);
    let target = PaneTarget::Tmux {
        pane: agent.pane.clone(),
        session: None,
    };
    wakebridge::wakedir::set_entry(&server.wake_dir, SID, &target).expect("map pane");
    agent
}

/// Waits until the session's status JSON satisfies `done`.
pub async fn session_until(
    server: &TestServer,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    any_session_until(server, what, |s| s["session_id"] == SID && done(s)).await
}

/// Waits until some session in `/sessions` satisfies `done` (a rewound one goes by a new id),
/// and returns it.
pub async fn any_session_until(
    server: &TestServer,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    super::eventually_ok(what, WAIT, async || {
        let body = server.get_json("/sessions").await;
        body["sessions"]
            .as_array()
            .and_then(|all| all.iter().find(|s| done(s)).cloned())
            .ok_or(body)
    })
    .await
}
