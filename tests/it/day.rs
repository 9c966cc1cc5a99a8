//! A day in the life, compressed: one real Claude Code session against the scripted model, its
//! hooks and status line wired by `wakebridge claude install`, the daemon in process on a
//! private tmux server. In order: woken through its inbox by a bus event while idle; a second
//! event mid-turn told at once, between tool calls, once; idle, nudged with backoff until acknowledged, back to life at a prompt; the wrap-up and
//! checkpoint warnings once each from the usage in its real transcript; held at the 5-hour limit
//! with nothing typed and resumed once at the reset; rewound on request. Every step is asserted
//! on what the model was told, and how many times.

use std::time::Duration;

use serde_json::json;
use wakebridge::mux::WAKE_PROMPT;

use crate::common;
use crate::common::claude::RealClaude;
use crate::common::day::{self, CHECKPOINT, CLOCK, NUDGE_1, NUDGE_2, QUIET, STEP, WRAP_UP};
use crate::common::harness::{TestServer, event_for};
use crate::common::model::{Model, Reply, unix_in};
use crate::common::rig::{any_session_until, start_daemon_with};
use crate::common::tmux::TmuxServer;

const REWOUND: &str = "You were rewound to a fresh context.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_in_the_life_of_a_real_claude_code_session() {
    let Some(claude) = common::real_claude() else {
        common::skip_or_fail("no `claude` on PATH", common::GET_CLAUDE);
        return;
    };
    let model = Model::start().await;
    // The first wake runs a real tool call long enough for a second event to arrive mid-turn;
    // the warnings keep the window where the transcript put it.
    model.on(
        WAKE_PROMPT,
        Reply {
            commands: vec!["sleep 8".into()],
            text: "Read the message.".into(),
            context_pct: None,
        },
    );
    model.on(WRAP_UP, Reply::at_context("Wrapping up.", 77.0));
    model.on(CHECKPOINT, Reply::at_context("Checkpoint written.", 87.0));

    let tmux = TmuxServer::start();
    let server = start_daemon_with(&tmux, None, CLOCK).await;
    let session = RealClaude::installed(&claude, &tmux, &server, &model.claude_env()).await;
    let sid = session.sid.clone();
    let context = || format!("{}\n{}", model.transcript(), session.screen(&tmux));

    // 1. Woken while idle through its inbox, told once; its turn runs a real 8 s tool call.
    let (_, body) = server.hook(event_for(&sid, 1), &[]).await;
    assert_eq!(body["action"], "inbox", "{body}\n{}", context());
    until("the wake told", &server, &session, &tmux, &model, || {
        model.told(WAKE_PROMPT) == 1
    })
    .await;

    // 2. A second event while the tool runs: sent at once (numbered: the same text within 30 s
    // is one Claude Code would drop), told with the tool's result, once; nothing owed.
    common::eventually("the tool call running", STEP, || {
        wakebridge::wakedir::is_busy(&server.wake_dir, &sid, 3600.0)
            && session.screen(&tmux).contains("sleep 8")
    })
    .await;
    let (_, body) = server.hook(event_for(&sid, 2), &[]).await;
    assert_eq!(body["action"], "inbox", "{body}\n{}", context());
    let second = format!("{WAKE_PROMPT} (#2)");
    until(
        "the second event told",
        &server,
        &session,
        &tmux,
        &model,
        || model.mentioned(&second) == 1,
    )
    .await;
    assert!(
        server.session(&sid).await["owed"].is_null(),
        "{}",
        context()
    );

    // 3. Idle: nudged, backing off, then acknowledged and left alone.
    let acknowledged = day::acknowledged(&server, &sid, context).await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(
        (model.told(NUDGE_1), model.told(NUDGE_2)),
        (1, 1),
        "{}",
        context()
    );
    assert_eq!(model.mentioned(WAKE_PROMPT), 2, "{}", context());

    // 4. Back to life at a prompt; the window fills and each warning is told once. A prompt
    // within the echo grace of the last nudge reads as that nudge's echo, not as life (its turn
    // here is one short answer): the human comes back after it.
    day::past_echo_grace(&acknowledged).await;
    session
        .submit(&tmux, "Build the parser. [[context 76]]")
        .await;
    until("the wrap-up told", &server, &session, &tmux, &model, || {
        model.mentioned(WRAP_UP) == 1
    })
    .await;
    let alive = server.session(&sid).await;
    assert_ne!(alive["state"], "acknowledged-idle", "{alive}");
    session
        .submit(&tmux, "Now the printer. [[context 86]]")
        .await;
    until(
        "the checkpoint told",
        &server,
        &session,
        &tmux,
        &model,
        || model.mentioned(CHECKPOINT) == 1,
    )
    .await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(
        (model.mentioned(WRAP_UP), model.mentioned(CHECKPOINT)),
        (1, 1),
        "{}",
        context()
    );

    // 5. The 5-hour limit: held with nothing typed, resumed once at the reset.
    let resets_at = unix_in(Duration::from_secs(20));
    model.limit_until(resets_at);
    session.submit(&tmux, "One more thing.").await;
    let limited = server
        .session_until(
            &sid,
            "held at the limit",
            STEP,
            |s| s["state"] == "limited",
            context,
        )
        .await;
    assert!(limited["limit"].is_object(), "{limited}");
    let (_, body) = server.hook(event_for(&sid, 3), &[]).await;
    assert_eq!(body["action"], "spool-busy", "{body}");
    let resumed_at = common::eventually_ok("the resume told", STEP, async || {
        match model.told("continue") {
            0 => Err(model.answered(429)),
            told => Ok(told),
        }
    })
    .await;
    assert_eq!(resumed_at, 1, "{}", context());
    assert_eq!(
        model.answered(429),
        1,
        "nothing was typed while held:\n{}",
        context()
    );
    assert!(
        unix_in(Duration::ZERO) >= resets_at,
        "resumed before the reset"
    );

    // 6. Rewound on request: /clear, the re-hydration told once, the new session followed.
    let (status, body) = server
        .post_json("/rewind", json!({"session_id": sid}))
        .await;
    assert_eq!(status, 200, "{body}");
    let rewound = any_session_until(&server, "the rewind done", |s| {
        s["rewind"]["performed"] == 1
    })
    .await;
    assert_ne!(rewound["session_id"], sid.as_str(), "{rewound}");
    until(
        "the re-hydration told",
        &server,
        &session,
        &tmux,
        &model,
        || model.told(REWOUND) == 1,
    )
    .await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(model.told(REWOUND), 1, "{}", context());
}

/// Waits until `done` holds, failing with the model's transcript, the screen and the session's
/// status.
async fn until(
    what: &str,
    server: &TestServer,
    session: &RealClaude,
    tmux: &TmuxServer,
    model: &Model,
    done: impl Fn() -> bool,
) {
    common::eventually_ok(what, STEP, async || {
        if done() {
            return Ok(());
        }
        let status = server.session(&session.sid).await;
        Err(format!(
            "{status}\n{}\n{}",
            model.transcript(),
            session.screen(tmux)
        ))
    })
    .await;
}
