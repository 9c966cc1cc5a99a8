//! Rewinds end to end: the daemon in process over real HTTP, a real tmux server on a private
//! socket, the scripted agent TUI (`common/fake_agent.py`) that takes `/clear` as Claude Code
//! does (an empty screen, a new session id, `SessionStart` with `source = "clear"` through the
//! real `wakebridge hook` binary), and the SQLite ledger on disk. An asked rewind waits for the
//! session's idle moment and types `/clear` then the re-hydration prompt, once; a draft, a turn
//! or a usage limit holds it; the old id still reaches the pane; `[rewind] auto` rewinds a
//! session told to checkpoint. The real Claude Code's `/clear` is the last test's.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common;
use crate::common::agent::Agent;
use crate::common::claude::RealClaude;
use crate::common::harness::{TestServer, event_for};
use crate::common::rig::{SID, any_session_until, session_until, spawn_agent, start_daemon_with};
use crate::common::tmux::TmuxServer;

/// Fast polls, so an idle moment is seen within a fraction of a second.
const FAST: &[(&str, &str)] = &[("WAKEBRIDGE_NUDGER__POLL_INTERVAL", "200ms")];

/// How long "nothing is typed" is watched: many polls past the settle time.
const QUIET: Duration = Duration::from_secs(2);

/// The shipped re-hydration prompt.
fn message() -> String {
    wakebridge::config::defaults().rewind.message.clone()
}

async fn ask(server: &TestServer, sid: &str) -> (u16, Value) {
    server
        .post_json("/rewind", json!({"session_id": sid}))
        .await
}

async fn ask_restart(server: &TestServer, sid: &str) -> (u16, Value) {
    server
        .post_json("/rewind", json!({"session_id": sid, "restart": true}))
        .await
}

/// The ids the fake agent took at each `/clear`.
fn new_ids(record: &Path) -> Vec<String> {
    std::fs::read_to_string(format!("{}.ids", record.display()))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn an_asked_rewind_waits_for_idle_then_clears_and_rehydrates_once_and_the_old_id_still_wakes()
{
    let tmux = TmuxServer::start();
    let server = start_daemon_with(&tmux, None, FAST).await;
    let agent = spawn_agent(&tmux, &server, "busy", true);
    // The agent asks mid-turn (a tool call): nothing is typed while the turn runs.
    let (status, body) = ask(&server, SID).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("asked")),
        "{body}"
    );
    let (_, again) = ask(&server, SID).await;
    assert_eq!(again["status"], "already-asked", "{again}");
    assert_eq!(server.session(SID).await["rewind"]["waiting"], "asked");
    tokio::time::sleep(QUIET).await;
    assert_eq!(agent.submitted(), Vec::<String>::new());

    // The turn ends (Stop): `/clear`, the fresh prompt, the message, once.
    agent.set("idle");
    let rewound = any_session_until(&server, "the rewind done", |s| {
        s["rewind"]["performed"] == 1
    })
    .await;
    assert_eq!(
        agent.submitted(),
        ["/clear".to_owned(), message()],
        "{rewound}"
    );
    let ids = new_ids(&agent.record);
    assert_eq!(ids.len(), 1, "one /clear, one new id");
    let new_id = ids[0].as_str();
    assert_eq!(rewound["session_id"], new_id, "{rewound}");
    assert_eq!(rewound["rewind"]["formerly"], json!([SID]), "{rewound}");
    assert_eq!(rewound["rewind"]["last_outcome"], "done", "{rewound}");
    assert_eq!(rewound["rewind"]["last_why"], "asked", "{rewound}");
    assert!(
        rewound["rewind"]["shown"]
            .as_str()
            .is_some_and(|s| s.starts_with("rewound 1\u{d7}, last ")),
        "{rewound}"
    );
    // The old id is no longer a session of its own.
    assert_eq!(server.session(SID).await, Value::Null);

    // The bus still knows the old id: once the re-hydrated turn ends, a DM to it wakes the
    // pane, recorded under the new id.
    tokio::time::sleep(QUIET).await;
    assert_eq!(agent.submitted().len(), 2, "nothing typed twice");
    agent.set("busy");
    tokio::time::sleep(Duration::from_millis(300)).await;
    agent.set("idle");
    any_session_until(&server, "the turn over", |s| {
        s["session_id"] == new_id && s["state"] == "idle"
    })
    .await;
    let (_, woke) = server.hook(event_for(SID, 1), &[]).await;
    assert_eq!(woke["action"], "tmux", "{woke}");
    assert_eq!(
        agent.submitted().last().map(String::as_str),
        Some(wakebridge::mux::WAKE_PROMPT)
    );
    let after = any_session_until(&server, "the DM under the new id", |s| {
        s["session_id"] == new_id && s["last_action"] == "tmux"
    })
    .await;
    assert_eq!(after["rewind"]["performed"], 1, "{after}");
    let metrics = server.get_text("/metrics").await;
    assert!(
        metrics.contains("wakebridge_rewinds_total{outcome=\"done\"} 1")
            && metrics.contains("wakebridge_rewinds_waiting 0"),
        "{metrics}"
    );
}

/// The spool backend runs no session loop: a rewind would wait forever, so it is refused (409,
/// not 400: the request is sound, this daemon cannot perform it).
#[tokio::test]
async fn a_rewind_asked_of_a_spool_only_daemon_is_refused_as_a_conflict() {
    let server = TestServer::start(&[]).await;
    let (status, answer) = ask(&server, SID).await;
    assert_eq!(status, 409, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("--backend mux"),
        "{answer}"
    );
}

#[tokio::test]
async fn a_draft_or_a_usage_limit_holds_a_rewind_and_nothing_is_typed() {
    let tmux = TmuxServer::start();
    let server = start_daemon_with(&tmux, None, FAST).await;
    // A human's draft at the prompt: the rewind waits, nothing is typed into it.
    let agent = spawn_agent(&tmux, &server, "idle", true);
    tmux.tmux(&["send-keys", "-t", &agent.pane, "-l", "half a thought"]);
    common::eventually("the draft on screen", Duration::from_secs(5), || {
        tmux.tmux(&["capture-pane", "-p", "-t", &agent.pane])
            .contains("half a thought")
    })
    .await;
    let (status, _) = ask(&server, SID).await;
    assert_eq!(status, 200);
    tokio::time::sleep(QUIET).await;
    assert_eq!(agent.submitted(), Vec::<String>::new());
    assert_eq!(server.session(SID).await["rewind"]["waiting"], "asked");

    // The draft is sent by its author; then the session hits its usage limit: still held.
    agent.set("busy");
    tmux.tmux(&["send-keys", "-t", &agent.pane, "Enter"]);
    agent.set("limit in 1h");
    session_until(&server, "the limit", |s| s["state"] == "limited").await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(agent.submitted(), ["half a thought".to_owned()]);
    assert!(new_ids(&agent.record).is_empty(), "no /clear while limited");
    assert_eq!(server.session(SID).await["rewind"]["waiting"], "asked");
}

#[tokio::test]
async fn auto_mode_rewinds_a_session_told_to_checkpoint_once_it_stays_idle() {
    let tmux = TmuxServer::start();
    let root = std::sync::Arc::new(common::tempdir());
    let claude = root.path().join("claude");
    let project = claude.join("projects").join("-work-proj");
    std::fs::create_dir_all(&project).expect("project dir");
    // 90 % of a 200K window: past the checkpoint threshold.
    let usage = format!(
        r#"{{"parentUuid":"p","isSidechain":false,"type":"assistant","sessionId":"{SID}","message":{{"id":"m","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{{"type":"text","text":"ok"}}],"usage":{{"input_tokens":180000,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":5}}}},"uuid":"a"}}"#
    ) + "\n";
    std::fs::write(project.join(format!("{SID}.jsonl")), usage).expect("transcript");
    let claude_dir = claude.display().to_string();
    let env = [
        FAST[0],
        ("WAKEBRIDGE_CONTEXT__ENABLED", "true"),
        ("WAKEBRIDGE_CONTEXT__POLL_INTERVAL", "200ms"),
        ("CLAUDE_CONFIG_DIR", claude_dir.as_str()),
        ("WAKEBRIDGE_REWIND__AUTO", "true"),
        ("WAKEBRIDGE_REWIND__AFTER", "1s"),
    ];
    let server = start_daemon_with(&tmux, Some(root), &env).await;
    let agent = spawn_agent(&tmux, &server, "idle", true);
    let checkpoint = wakebridge::config::defaults()
        .context
        .thresholds
        .checkpoint
        .message
        .replace("{pct}", "90");
    common::eventually(
        "the checkpoint warning typed",
        Duration::from_secs(15),
        || agent.submitted().contains(&checkpoint),
    )
    .await;
    // The agent checkpoints (a turn), then sits idle: rewound after `after`.
    let told_at = std::time::Instant::now();
    agent.set("busy");
    tokio::time::sleep(Duration::from_millis(300)).await;
    agent.set("idle");
    let rewound = any_session_until(&server, "the automatic rewind", |s| {
        s["rewind"]["performed"] == 1
    })
    .await;
    assert!(
        told_at.elapsed() >= Duration::from_secs(1),
        "before `after`"
    );
    assert_eq!(rewound["rewind"]["last_why"], "auto", "{rewound}");
    let submitted = agent.submitted();
    assert_eq!(
        submitted[submitted.len() - 2..],
        ["/clear".to_owned(), message()],
        "{submitted:?}"
    );
    // Once per crossing: nothing more, though the old transcript still says 90 %.
    tokio::time::sleep(QUIET).await;
    assert_eq!(agent.submitted(), submitted);
}

/// The daemon's settings for a restart: `[launch] command` is the scripted agent, recording
/// into `name`'s files (so the agent started again is told apart from the one it replaces).
fn restart_env(tmux: &TmuxServer, name: &str) -> (Agent, String) {
    let (record, control) = (
        tmux.dir().join(format!("{name}.rec")),
        tmux.dir().join(format!("{name}.ctl")),
    );
    std::fs::write(&control, "idle").expect("control file");
    let command = [
        "python3",
        common::FAKE_AGENT,
        &record.display().to_string(),
        &control.display().to_string(),
    ]
    .join(",");
    let restarted = Agent {
        pane: String::new(),
        record,
        control,
    };
    (restarted, command)
}

/// The agent ends a turn, so its hooks report its working directory (a restart starts there).
async fn end_a_turn(agent: &Agent, server: &TestServer) {
    agent.set("busy");
    tokio::time::sleep(Duration::from_millis(300)).await;
    agent.set("idle");
    session_until(server, "the turn over", |s| s["cwd"].is_string()).await;
}

#[tokio::test]
async fn a_restart_starts_the_agent_again_in_its_pane_with_the_rehydration_prompt() {
    let tmux = TmuxServer::start();
    let (restarted, command) = restart_env(&tmux, "again");
    let server = start_daemon_with(
        &tmux,
        None,
        &[FAST[0], ("WAKEBRIDGE_LAUNCH__COMMAND", command.as_str())],
    )
    .await;
    let agent = spawn_agent(&tmux, &server, "idle", true);
    end_a_turn(&agent, &server).await;
    let (status, body) = ask_restart(&server, SID).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("asked")),
        "{body}"
    );
    let done = session_until(&server, "the restart done", |s| {
        s["rewind"]["performed"] == 1
    })
    .await;
    assert_eq!(done["rewind"]["last_why"], "restart", "{done}");
    assert_eq!(done["rewind"]["last_outcome"], "done", "{done}");
    // The same pane runs a new agent, which got the message as its first prompt; the old one
    // got nothing typed (no `/clear`).
    assert_eq!(done["pane"]["pane"], agent.pane.as_str(), "{done}");
    assert_eq!(restarted.submitted(), [message()]);
    assert_eq!(agent.submitted(), Vec::<String>::new());
    tokio::time::sleep(QUIET).await;
    assert_eq!(restarted.submitted().len(), 1, "typed once");
}

#[tokio::test]
async fn a_restart_revives_an_agent_whose_pane_is_gone() {
    let tmux = TmuxServer::start();
    let (restarted, command) = restart_env(&tmux, "revived");
    let server = start_daemon_with(
        &tmux,
        None,
        &[FAST[0], ("WAKEBRIDGE_LAUNCH__COMMAND", command.as_str())],
    )
    .await;
    let agent = spawn_agent(&tmux, &server, "idle", true);
    end_a_turn(&agent, &server).await;
    tmux.tmux(&["kill-pane", "-t", &agent.pane]);
    let (status, _) = ask_restart(&server, SID).await;
    assert_eq!(status, 200);
    let done = session_until(&server, "the revival", |s| s["rewind"]["performed"] == 1).await;
    assert_eq!(done["rewind"]["last_outcome"], "done", "{done}");
    let pane = done["pane"]["pane"].as_str().unwrap_or_default().to_owned();
    assert!(!pane.is_empty() && pane != agent.pane, "a new pane: {done}");
    assert_eq!(restarted.submitted(), [message()]);
    // The bus's id reaches the new pane.
    tokio::time::sleep(QUIET).await;
    let (_, woke) = server.hook(event_for(SID, 1), &[]).await;
    assert_eq!(woke["action"], "tmux", "{woke}");
    assert_eq!(
        restarted.submitted().last().map(String::as_str),
        Some(wakebridge::mux::WAKE_PROMPT)
    );
}

#[tokio::test]
async fn the_real_claude_code_is_cleared_and_rehydrated_and_its_new_session_followed() {
    let Some(claude) = common::real_claude() else {
        common::skip_or_fail("no `claude` on PATH", common::GET_CLAUDE);
        return;
    };
    let tmux = TmuxServer::start();
    // The typed path, whose prompts Claude Code's history records (an inbox message it does
    // not): the day test rewinds through the inbox.
    let server = start_daemon_with(
        &tmux,
        None,
        &[
            FAST[0],
            ("WAKEBRIDGE_CONTEXT__ENABLED", "true"),
            ("WAKEBRIDGE_WAKE__INBOX", "false"),
        ],
    )
    .await;
    let env = [
        format!("ANTHROPIC_API_KEY={}", common::CLAUDE_TEST_KEY),
        "ANTHROPIC_BASE_URL=http://127.0.0.1:9".to_owned(),
    ];
    let claude = RealClaude::start(&claude, &tmux, &server, &env).await;
    let old = claude.sid.clone();
    let (status, body) = ask(&server, &old).await;
    assert_eq!(status, 200, "{body}");
    let rewound = any_session_until(&server, "the rewind done", |s| {
        s["rewind"]["performed"] == 1
    })
    .await;
    let new_id = rewound["session_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_ne!(new_id, old, "{rewound}");
    assert_eq!(rewound["rewind"]["last_outcome"], "done", "{rewound}");
    let hooks = claude.hooks();
    assert!(
        hooks
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|h| h["hook_event_name"] == "SessionStart"
                && h["source"] == "clear"
                && h["session_id"] == new_id.as_str()),
        "{hooks}"
    );
    // Claude Code's own history has both, in order (it writes the entry a moment after the
    // submit).
    let history_file = server.root.path().join("home/.claude/history.jsonl");
    let typed = || -> Vec<String> {
        std::fs::read_to_string(&history_file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|v| v["display"].as_str().map(str::to_owned))
            .collect()
    };
    common::eventually(
        "both in Claude Code's history",
        Duration::from_secs(30),
        || typed().len() >= 2,
    )
    .await;
    assert_eq!(
        typed(),
        ["/clear".to_owned(), message()],
        "{}",
        claude.screen(&tmux)
    );
    // The context monitor follows the new session's transcript.
    let followed = any_session_until(&server, "the new transcript followed", |s| {
        s["session_id"] == new_id.as_str()
            && s["context"]["transcript"]
                .as_str()
                .is_some_and(|t| t.ends_with(&format!("{new_id}.jsonl")))
    })
    .await;
    assert!(followed["context"].is_object(), "{followed}");
}

/// The real Claude Code, restarted: the launcher starts it again in its pane (its own HOME, as
/// the first start had), Claude Code's registry gives the new session id, which takes over the
/// old id's address; the re-hydration prompt is its first prompt.
#[tokio::test]
async fn the_real_claude_code_is_restarted_in_its_pane_and_keeps_its_address() {
    let Some(claude) = common::real_claude() else {
        common::skip_or_fail("no `claude` on PATH", common::GET_CLAUDE);
        return;
    };
    let tmux = TmuxServer::start();
    let root = std::sync::Arc::new(common::tempdir());
    let api = [
        format!("ANTHROPIC_API_KEY={}", common::CLAUDE_TEST_KEY),
        "ANTHROPIC_BASE_URL=http://127.0.0.1:9".to_owned(),
    ];
    // What `[launch] command` starts: Claude Code with the test's private environment (tmux
    // gives the pane its TMUX_PANE, which the hooks map it by).
    let mut command = vec!["env".to_owned()];
    command.extend(
        common::env::test_env(root.path(), &[])
            .into_iter()
            .map(|(k, v)| format!("{k}={v}")),
    );
    command.extend(api.iter().cloned());
    command.extend([
        "TERM=xterm-256color".to_owned(),
        claude.display().to_string(),
    ]);
    let command = command.join(",");
    let server = start_daemon_with(
        &tmux,
        Some(root),
        &[FAST[0], ("WAKEBRIDGE_LAUNCH__COMMAND", command.as_str())],
    )
    .await;
    let claude = RealClaude::start(&claude, &tmux, &server, &api).await;
    let old = claude.sid.clone();
    let (status, body) = ask_restart(&server, &old).await;
    assert_eq!(status, 200, "{body}");
    // A start takes Claude Code seconds (the launcher allows `[launch] timeout`, 90 s).
    let started = std::time::Instant::now();
    let restarted = loop {
        let body = server.get_json("/sessions").await;
        let done = body["sessions"]
            .as_array()
            .and_then(|all| all.iter().find(|s| s["rewind"]["performed"] == 1).cloned());
        if let Some(done) = done {
            break done;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "no restart: {body}\n{}",
            claude.screen(&tmux)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(restarted["rewind"]["last_outcome"], "done", "{restarted}");
    let new_id = restarted["session_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_ne!(new_id, old, "{restarted}");
    assert_eq!(restarted["rewind"]["formerly"], json!([old]), "{restarted}");
    assert_eq!(
        restarted["pane"]["pane"],
        claude.pane.as_str(),
        "{restarted}"
    );
    // Claude Code took the re-hydration prompt as the new session's first prompt (its own
    // UserPromptSubmit hook says so; 2.1.197 writes history.jsonl seconds later under load).
    common::eventually(
        "the prompt submitted to the new session",
        Duration::from_secs(30),
        || {
            claude
                .hooks()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .any(|h| {
                    h["hook_event_name"] == "UserPromptSubmit"
                        && h["prompt"] == message().as_str()
                        && h["session_id"] == new_id.as_str()
                })
        },
    )
    .await;
    // The bus's old id still names this agent.
    let (_, answer) = server.hook(event_for(&old, 1), &[]).await;
    assert_ne!(answer["action"], "spool-unmapped", "{answer}");
    let after = any_session_until(&server, "the DM under the new id", |s| {
        s["session_id"] == new_id.as_str() && s["last_delivery_at"].is_string()
    })
    .await;
    assert!(after["last_action"].is_string(), "{after}");
}
