//! Owed wakes end to end: the daemon in process over real HTTP, a real tmux server on a private
//! socket, the scripted agent TUI firing the real `wakebridge hook` binary as Claude Code fires
//! its hooks, busy markers, panes.json and the SQLite ledger on disk. A bus event that cannot be
//! typed now is owed; it is paid exactly once, by the Stop hook's answer or by typing once the
//! session is idle.

use std::time::Duration;

use serde_json::Value;
use wakebridge::mux::WAKE_PROMPT;

use crate::common;
use crate::common::agent::Agent;
use crate::common::claude::RealClaude;
use crate::common::harness::{TestServer, event_for};
use crate::common::rig::{
    SID, agent_env, session_until, spawn_agent, spawn_agent_in, start_daemon, start_daemon_with,
};
use crate::common::tmux::TmuxServer;

/// How long "nothing more happens" is watched: many nudger polls.
const QUIET: Duration = Duration::from_millis(2500);
/// A DM for the session while its busy marker says a turn runs: answered `spool-busy`, owed.
async fn dm_while_busy(server: &TestServer, id: u32) {
    wakebridge::wakedir::set_busy(&server.wake_dir, SID).expect("busy");
    let (_, body) = server.hook(event_for(SID, id), &[]).await;
    assert_eq!(body["action"], "spool-busy");
}

/// Waits until the session's owed wake was paid by typing, then checks it was typed once.
async fn paid_by_typing_once(server: &TestServer, agent: &Agent) -> Value {
    let paid = session_until(server, "a typed payment", |s| {
        s["paid"]["last_how"] == "typed"
    })
    .await;
    assert!(paid["owed"].is_null(), "{paid}");
    tokio::time::sleep(QUIET).await;
    assert_eq!(typed_wakes(agent), 1, "{:?}", agent.submitted());
    paid
}

fn typed_wakes(agent: &Agent) -> usize {
    agent
        .submitted()
        .iter()
        .filter(|t| *t == WAKE_PROMPT)
        .count()
}

#[tokio::test]
async fn a_dm_during_a_turn_is_paid_by_the_stop_hook_when_the_turn_ends_exactly_once() {
    let tmux = TmuxServer::start();
    let server = start_daemon(&tmux, None).await;
    let agent = spawn_agent(&tmux, &server, "busy", true);
    for id in [1, 2] {
        dm_while_busy(&server, id).await;
    }
    let owed = session_until(&server, "two owed events", |s| s["owed"]["events"] == 2).await;
    assert!(owed["paid"].is_null(), "{owed}");

    // The turn ends: the Stop hook keeps Claude going with the wake prompt; nothing is typed.
    agent.set("idle");
    let paid = session_until(&server, "the hook's payment", |s| {
        s["paid"]["last_how"] == "hook"
    })
    .await;
    assert!(paid["owed"].is_null(), "{paid}");
    assert_eq!(paid["paid"]["by_hook"], 1);
    assert_eq!(paid["paid"]["last_events"], 2);
    tokio::time::sleep(QUIET).await;
    assert_eq!(
        agent.submitted(),
        [format!(
            "[stop hook] {WAKE_PROMPT} (2 directed events arrived while you were working.)"
        )],
        "paid once, by the hook's answer, with the count and never the payload"
    );
    assert_eq!(
        std::fs::read(&agent.record).expect("record"),
        b"",
        "nothing typed"
    );
    let metrics = reqwest::get(server.url("/metrics")).await.expect("metrics");
    let metrics = metrics.text().await.expect("text");
    assert!(
        metrics.contains("wakebridge_owed_wakes_paid_total{how=\"hook\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("wakebridge_owed_sessions 0"), "{metrics}");
}

#[tokio::test]
async fn a_stop_that_already_goes_on_is_not_blocked_again_and_the_daemon_types_the_wake() {
    let tmux = TmuxServer::start();
    let server = start_daemon(&tmux, None).await;
    let agent = spawn_agent(&tmux, &server, "idle", false);
    dm_while_busy(&server, 1).await;
    // A Stop with stop_hook_active (Claude Code already going on for a hook) is left alone.
    let payload =
        format!(r#"{{"hook_event_name":"Stop","session_id":"{SID}","stop_hook_active":true}}"#);
    let mut cmd = common::harness::binary(server.root.path(), &[]);
    cmd.arg("hook");
    let out = common::harness::fed(cmd, &payload);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "", "no block answer");
    // The hook cleared the marker (the turn ended): the daemon types the owed wake, once.
    paid_by_typing_once(&server, &agent).await;
}

#[tokio::test]
async fn without_hooks_an_owed_wake_is_typed_once_the_session_looks_idle() {
    let tmux = TmuxServer::start();
    let server = start_daemon(&tmux, None).await;
    let agent = spawn_agent(&tmux, &server, "busy", false);
    // A marker left by a turn that was interrupted with Esc (no hook clears it).
    dm_while_busy(&server, 1).await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(
        typed_wakes(&agent),
        0,
        "nothing typed while the title spins"
    );
    assert_eq!(server.session(SID).await["owed"]["events"], 1);

    agent.set("idle");
    let paid = paid_by_typing_once(&server, &agent).await;
    assert_eq!(paid["paid"]["by_typing"], 1);
}

#[tokio::test]
async fn an_owed_wake_survives_a_daemon_restart() {
    let tmux = TmuxServer::start();
    let server = start_daemon(&tmux, None).await;
    let agent = spawn_agent(&tmux, &server, "busy", false);
    dm_while_busy(&server, 1).await;
    let root = server.stop().await;

    agent.set("idle");
    let server = start_daemon(&tmux, Some(root)).await;
    paid_by_typing_once(&server, &agent).await;
}

#[tokio::test]
async fn an_enter_that_does_not_submit_is_pressed_again_then_reported_and_stays_owed() {
    let tmux = TmuxServer::start();
    let server = start_daemon(&tmux, None).await;
    let agent = spawn_agent(&tmux, &server, "deaf1", false);
    // The first Enter is lost; the second submits.
    assert_eq!(
        server.hook(event_for(SID, 1), &[]).await.1["action"],
        "tmux"
    );
    assert_eq!(agent.submitted(), [WAKE_PROMPT]);
    assert_eq!(
        std::fs::read(&agent.record).expect("record"),
        format!("{WAKE_PROMPT}\r\r").as_bytes()
    );

    // No Enter submits: reported as a failure, and the event stays owed.
    agent.set("deaf");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (_, body) = server.hook(event_for(SID, 2), &[]).await;
    assert_eq!(body["action"], "spool-mux-failed");
    let status = server.session(SID).await;
    assert_eq!(status["last_error_kind"], "unsubmitted", "{status}");
    assert_eq!(status["owed"]["events"], 1, "{status}");
    // Once the agent takes Enter again, the owed wake goes through (its text is already on
    // the prompt line: submitted, not typed a second time).
    agent.set("idle");
    session_until(&server, "a typed payment", |s| s["owed"].is_null()).await;
    assert_eq!(agent.submitted(), [WAKE_PROMPT, WAKE_PROMPT]);
}

#[tokio::test]
async fn a_submit_the_screen_shows_only_after_its_hook_still_counts_as_typed() {
    let tmux = TmuxServer::start();
    let server = start_daemon(&tmux, None).await;
    // Like Claude Code on a loaded machine: the prompt is taken and its UserPromptSubmit hook
    // runs (marking the turn busy) before the screen is redrawn, here for longer than the
    // injector's confirm waits.
    let mut env = agent_env(server.root.path(), true);
    for (key, value) in &mut env {
        if key == "FAKE_AGENT_HOOK" {
            value.push_str("; sleep 2");
        }
    }
    let agent = spawn_agent_in(&tmux, &server, "idle", &env);

    let (_, body) = server.hook(event_for(SID, 1), &[]).await;
    assert_eq!(body["action"], "tmux", "{body}");
    let status = server.session(SID).await;
    assert!(status["owed"].is_null(), "{status}");
    assert_eq!(typed_wakes(&agent), 1, "{:?}", agent.submitted());
}

#[tokio::test]
async fn copy_mode_and_menus_hold_typing_back_until_they_are_gone() {
    let tmux = TmuxServer::start();
    let server = start_daemon(&tmux, None).await;
    let agent = spawn_agent(&tmux, &server, "idle", false);
    tmux.tmux(&["copy-mode", "-t", &agent.pane]);
    assert_eq!(
        server.hook(event_for(SID, 1), &[]).await.1["action"],
        "spool-busy"
    );
    tokio::time::sleep(QUIET).await;
    assert_eq!(
        std::fs::read(&agent.record).expect("record"),
        b"",
        "nothing typed in copy mode"
    );
    tmux.tmux(&["send-keys", "-t", &agent.pane, "-X", "cancel"]);
    session_until(&server, "the owed wake typed", |s| s["owed"].is_null()).await;
    assert_eq!(agent.submitted(), [WAKE_PROMPT]);

    agent.set("dialog");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        server.hook(event_for(SID, 2), &[]).await.1["action"],
        "spool-busy"
    );
    tokio::time::sleep(QUIET).await;
    assert_eq!(
        agent.submitted(),
        [WAKE_PROMPT],
        "nothing typed into the menu"
    );
    assert_eq!(server.session(SID).await["owed"]["events"], 1);
    agent.set("idle");
    session_until(&server, "the owed wake typed", |s| s["owed"].is_null()).await;
    assert_eq!(agent.submitted(), [WAKE_PROMPT, WAKE_PROMPT]);
}

/// The real Claude Code (on PATH; `.ci/run` installs it from npm), offline, with wakebridge's
/// hooks wired the way `wakebridge hook --print-settings` says: launched in a pane, mapped by
/// its own SessionStart hook; a DM arrives while a turn runs (its API calls fail and retry
/// offline) and is owed; when the turn ends (offline it ends in StopFailure, which cannot keep
/// Claude Code going) the daemon types the owed wake prompt, and Claude Code submits it, once.
#[tokio::test]
async fn real_claude_code_gets_the_wake_owed_from_its_turn_once_the_turn_ends() {
    let Some(claude) = common::real_claude() else {
        common::skip_or_fail("no `claude` on PATH", common::GET_CLAUDE);
        return;
    };
    let tmux = TmuxServer::start();
    // Typing's owed path: through the inbox the DM would not wait (tests/it/inbox.rs).
    let server = start_daemon_with(&tmux, None, &[("WAKEBRIDGE_WAKE__INBOX", "false")]).await;
    let env = [
        format!("ANTHROPIC_API_KEY={}", common::CLAUDE_TEST_KEY),
        // Offline, a few retries keep the turn running for seconds, not minutes.
        "CLAUDE_CODE_MAX_RETRIES=4".into(),
    ];
    let claude = RealClaude::start(&claude, &tmux, &server, &env).await;
    let hooks = || claude.hooks();
    let screen = || claude.screen(&tmux);
    let sid = claude.sid.as_str();

    // A human starts a turn; a DM arrives while it runs.
    claude.submit(&tmux, "hello").await;
    // Its hook marks the session busy: the hook log (written by `tee` on the way in) can show
    // the event a few milliseconds before the marker is there.
    common::eventually("the turn to start", Duration::from_secs(10), || {
        hooks().contains("\"UserPromptSubmit\"")
            && wakebridge::wakedir::is_busy(&server.wake_dir, sid, 3600.0)
    })
    .await;
    let (_, body) = server.hook(event_for(sid, 1), &[]).await;
    assert_eq!(body["action"], "spool-busy", "{}", screen());

    // The turn ends in StopFailure offline; the daemon then types the owed wake.
    let status = server.get_json("/sessions").await;
    let find = |status: &Value| {
        status["sessions"]
            .as_array()
            .and_then(|all| all.iter().find(|s| s["session_id"] == sid).cloned())
            .unwrap_or(Value::Null)
    };
    assert_eq!(find(&status)["owed"]["events"], 1, "{status}");
    let started = std::time::Instant::now();
    loop {
        let status = find(&server.get_json("/sessions").await);
        if status["paid"]["last_how"] == "typed" {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "no typed payment: {status}\n{}\n{}",
            screen(),
            hooks()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(hooks().contains("\"StopFailure\""), "{}", hooks());
    common::eventually("the wake prompt submitted", Duration::from_secs(10), || {
        hooks().contains(&format!("\"prompt\":\"{WAKE_PROMPT}\""))
    })
    .await;
    tokio::time::sleep(QUIET).await;
    let submitted = hooks()
        .matches(&format!("\"prompt\":\"{WAKE_PROMPT}\""))
        .count();
    assert_eq!(submitted, 1, "typed once:\n{}", hooks());
}
