//! A day in the life of a real Codex CLI session, compressed as `day.rs` compresses Claude
//! Code's: the Codex TUI on a private tmux server, its hooks wired and approved by `wakebridge
//! codex install --trust-hooks`, its model the Responses stand-in, the daemon in process. Its
//! hooks cannot name its pane (they run in Codex's shared app-server), so everything reaches it
//! through Codex's control socket. In order: woken while idle by a bus event; a second event
//! mid-turn told once, folded into the running turn; idle, nudged with backoff until
//! acknowledged; the wrap-up and checkpoint warnings once each from the usage in its rollout;
//! held at the 5-hour limit (429 `usage_limit_reached`) with nothing told, resumed once at the
//! reset (Codex never resumes by itself); a rewind refused, saying why. Every step is asserted
//! on what the model was told, and how many times.

use std::time::Duration;

use serde_json::json;
use wakebridge::mux::WAKE_PROMPT;

use crate::common;
use crate::common::claude::RealClaude;
use crate::common::codex::{CodexTui, setup};
use crate::common::day::{self, CHECKPOINT, CLOCK, NUDGE_1, NUDGE_2, QUIET, STEP, WRAP_UP, until};
use crate::common::harness::event_for;
use crate::common::model::{Model, unix_in};
use crate::common::responses::{FIRST_TOTAL, REPLY, Responses, WINDOW};
use crate::common::rig::start_daemon_with;
use crate::common::tmux::TmuxServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_in_the_life_of_a_real_codex_session() {
    let Some(codex) = common::real_codex() else {
        common::skip_or_fail("codex is not on PATH", common::GET_CODEX);
        return;
    };
    let model = Responses::start().await;
    // The first wake's turn is long enough for a second event to arrive while it runs.
    model.slow(WAKE_PROMPT, Duration::from_secs(8));
    let setup = setup(&model);
    let tmux = TmuxServer::start();
    let server = start_daemon_with(&tmux, Some(setup.root.clone()), CLOCK).await;
    let tui = CodexTui::start(&codex, &setup, &tmux);
    let context = || format!("{}\n{}", model.transcript(), tui.screen(&tmux));
    let sid = tui.first_prompt(&tmux, &server, &context).await;
    let known = server.session(&sid).await;
    assert!(
        known["pane"].is_null(),
        "its hooks cannot name its pane: {known}"
    );
    common::eventually("the first turn answered", STEP, || {
        tui.screen(&tmux).contains(REPLY)
    })
    .await;

    // 1. Woken while idle through its control socket, told once; its turn takes 8 s.
    let (_, body) = server.hook(event_for(&sid, 1), &[]).await;
    assert_eq!(body["action"], "inbox", "{body}\n{}", context());
    until("the wake told", &server, &sid, &context, || {
        model.told(WAKE_PROMPT) == 1
    })
    .await;

    // 2. A second event while that turn runs: sent at once (numbered, as to Claude Code),
    // folded into the running turn and told once; nothing owed.
    common::eventually("the turn running", STEP, || {
        wakebridge::wakedir::is_busy(&server.wake_dir, &sid, 3600.0)
    })
    .await;
    let (_, body) = server.hook(event_for(&sid, 2), &[]).await;
    assert_eq!(body["action"], "inbox", "{body}\n{}", context());
    let second = format!("{WAKE_PROMPT} (#2)");
    until("the second event told", &server, &sid, &context, || {
        model.told(&second) == 1
    })
    .await;
    assert!(
        server.session(&sid).await["owed"].is_null(),
        "{}",
        context()
    );

    // 3. Idle: nudged, backing off, then acknowledged and left alone.
    let acknowledged = day::acknowledged(&server, &sid, &context).await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(
        (model.told(NUDGE_1), model.told(NUDGE_2)),
        (1, 1),
        "{}",
        context()
    );
    assert_eq!(model.told(WAKE_PROMPT), 2, "{}", context());
    // What they cost, from its rollout: each nudge's turn, one response, charged to nudging.
    let charged = format!(
        "wakebridge_caused_tokens_total{{kind=\"nudge\"}} {}",
        2 * FIRST_TOTAL
    );
    common::eventually_ok("the nudges charged", STEP, async || {
        let metrics = server.get_text("/metrics").await;
        match metrics.lines().any(|line| line == charged) {
            true => Ok(()),
            false => Err(format!("{charged} not in\n{metrics}")),
        }
    })
    .await;

    // 4. Back to life at a prompt; the window fills (in Codex's own figures, from its
    // rollout) and each warning is told once.
    day::past_echo_grace(&acknowledged).await;
    tui.submit(&tmux, "Build the parser. [[context 76]]");
    until("the wrap-up told", &server, &sid, &context, || {
        model.mentioned(WRAP_UP) == 1
    })
    .await;
    let alive = server.session(&sid).await;
    assert_ne!(alive["state"], "acknowledged-idle", "{alive}");
    assert_eq!(alive["context"]["context_window"], WINDOW, "{alive}");
    tui.submit(&tmux, "Now the printer. [[context 86]]");
    until("the checkpoint told", &server, &sid, &context, || {
        model.mentioned(CHECKPOINT) == 1
    })
    .await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(
        (model.mentioned(WRAP_UP), model.mentioned(CHECKPOINT)),
        (1, 1),
        "{}",
        context()
    );

    // 5. The 5-hour limit: held with nothing told (a bus event stays spooled), resumed once
    // at the reset through the socket, never typed into Codex's model-switch menu.
    let resets_at = unix_in(Duration::from_secs(20));
    model.limit_until(resets_at);
    tui.submit(&tmux, "One more thing.");
    let limited = server
        .session_until(
            &sid,
            "held at the limit",
            STEP,
            |s| s["state"] == "limited",
            &context,
        )
        .await;
    assert!(limited["limit"].is_object(), "{limited}");
    let (_, body) = server.hook(event_for(&sid, 3), &[]).await;
    assert_eq!(body["action"], "spool-busy", "{body}");
    let resumed = common::eventually_ok("the resume told", STEP, async || {
        match model.told("continue") {
            0 => Err(format!("{}\n{}", server.session(&sid).await, context())),
            told => Ok(told),
        }
    })
    .await;
    assert_eq!(resumed, 1, "{}", context());
    assert_eq!(
        model.answered(429),
        1,
        "nothing told while held:\n{}",
        context()
    );
    assert!(
        unix_in(Duration::ZERO) >= resets_at,
        "resumed before the reset"
    );

    // 6. Not rewound (its `/clear` starts a chat its hooks name only at the next prompt, and it
    // compacts its own context): refused, saying why.
    let (status, body) = server
        .post_json("/rewind", json!({"session_id": sid}))
        .await;
    assert_eq!(status, 400, "{body}");
    let said = body["error"].as_str().unwrap_or_default();
    assert!(
        said.contains("Codex CLI sessions are not rewound"),
        "{body}"
    );
}

/// One daemon, a real Claude Code session and a real Codex session side by side, each with its
/// own model: a bus event for one is told to that one only, through its own inbox (Claude
/// Code's socket, Codex's control socket), and then the other's to the other, held while a
/// person paused it and told at the unpause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_daemon_tells_a_claude_code_and_a_codex_session_each_its_own() {
    let Some(claude) = common::real_claude() else {
        common::skip_or_fail("no `claude` on PATH", common::GET_CLAUDE);
        return;
    };
    let Some(codex) = common::real_codex() else {
        common::skip_or_fail("codex is not on PATH", common::GET_CODEX);
        return;
    };
    let (claude_model, codex_model) = (Model::start().await, Responses::start().await);
    let setup = setup(&codex_model);
    let tmux = TmuxServer::start();
    let quiet = [("WAKEBRIDGE_NUDGER__ENABLED", "false")];
    let server = start_daemon_with(&tmux, Some(setup.root.clone()), &quiet).await;
    let cc = RealClaude::installed(&claude, &tmux, &server, &claude_model.claude_env()).await;
    let tui = CodexTui::start(&codex, &setup, &tmux);
    let context = || {
        format!(
            "claude:\n{}\n{}\ncodex:\n{}\n{}",
            claude_model.transcript(),
            cc.screen(&tmux),
            codex_model.transcript(),
            tui.screen(&tmux)
        )
    };
    let cx = tui.first_prompt(&tmux, &server, &context).await;
    assert_eq!(server.session(&cc.sid).await["agent"], "claude");
    common::eventually("the first Codex turn answered", STEP, || {
        tui.screen(&tmux).contains(REPLY)
    })
    .await;

    let (_, body) = server.hook(event_for(&cc.sid, 1), &[]).await;
    assert_eq!(body["action"], "inbox", "{body}\n{}", context());
    until("Claude Code told", &server, &cc.sid, &context, || {
        claude_model.told(WAKE_PROMPT) == 1
    })
    .await;
    // Paused by a person, as Claude Code's: its event waits, and is told at the unpause.
    let (status, body) = server
        .post_json("/pause", json!({"session_ids": [cx]}))
        .await;
    assert_eq!(status, 200, "{body}");
    let (_, body) = server.hook(event_for(&cx, 2), &[]).await;
    assert_eq!(body["action"], "spool-paused", "{body}\n{}", context());
    tokio::time::sleep(QUIET).await;
    assert_eq!(codex_model.told(WAKE_PROMPT), 0, "{}", context());
    let (status, body) = server
        .post_json("/unpause", json!({"session_ids": [cx]}))
        .await;
    assert_eq!(status, 200, "{body}");
    until("Codex told at the unpause", &server, &cx, &context, || {
        codex_model.told(WAKE_PROMPT) == 1
    })
    .await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(
        (
            claude_model.told(WAKE_PROMPT),
            codex_model.told(WAKE_PROMPT)
        ),
        (1, 1),
        "{}",
        context()
    );
    let metrics = server.get_text("/metrics").await;
    for agent in ["claude", "codex"] {
        let sample = format!("wakebridge_sessions_by_agent{{agent=\"{agent}\"}} 1\n");
        assert!(metrics.contains(&sample), "{sample}{metrics}");
    }
}
