//! The budget and a person's controls against the real Claude Code and the scripted model: the
//! usage windows the model reports reach the status line, `wakebridge statusline` keeps them,
//! and the daemon spends an under-used window near its end (one budget nudge, its turn charged)
//! and spares a nearly spent one (no nudges at all); a paused session gets nothing and its bus
//! event is told once unpaused; outside the active hours nothing is nudged or resumed, yet a bus
//! event still wakes. Every step is asserted on what the model was told.

use std::time::Duration;

use serde_json::json;
use wakebridge::mux::WAKE_PROMPT;

use crate::common;
use crate::common::claude::RealClaude;
use crate::common::harness::{TestServer, event_for};
use crate::common::model::{Model, unix_in};
use crate::common::rig::start_daemon_with;
use crate::common::tmux::TmuxServer;

/// Nudging in seconds: 3 s of quiet is idle, then a nudge, 2 s, 4 s, acknowledged after two.
const FAST: &[(&str, &str)] = &[
    ("WAKEBRIDGE_NUDGER__POLL_INTERVAL", "200ms"),
    ("WAKEBRIDGE_NUDGER__IDLE_AFTER", "3s"),
    ("WAKEBRIDGE_NUDGER__BASE_COOLDOWN", "2s"),
    ("WAKEBRIDGE_NUDGER__MAX_COOLDOWN", "4s"),
    ("WAKEBRIDGE_NUDGER__ACKNOWLEDGE_AFTER", "2"),
    ("WAKEBRIDGE_WAKE__INBOX", "false"),
];

const STEP: Duration = Duration::from_secs(60);
const BUDGET_NUDGE: &str = "Usage budget: 70% of the 5-hour window is still unused";
const NUDGE_1: &str = "Please continue with the task at hand.";

/// A real session, installed, on the scripted model (reporting `windows`, the 5-hour and 7-day
/// usage, when given), with `env` for the daemon, after one prompt answered.
async fn real_session(
    env: &[(&'static str, &str)],
    windows: Option<[(f64, u64); 2]>,
) -> Option<(TmuxServer, TestServer, Model, RealClaude)> {
    let Some(claude) = common::real_claude() else {
        common::skip_or_fail("no `claude` on PATH", common::GET_CLAUDE);
        return None;
    };
    let model = Model::start().await;
    if let Some([five, week]) = windows {
        model.windows(five, week);
    }
    let tmux = TmuxServer::start();
    let server = start_daemon_with(&tmux, None, env).await;
    let session = RealClaude::installed(&claude, &tmux, &server, &model.claude_env()).await;
    session.submit(&tmux, "Start.").await;
    common::eventually("the first turn answered", STEP, || {
        model.told("Start.") == 1
    })
    .await;
    Some((tmux, server, model, session))
}

/// [`real_session`] on a model that reports the windows, once the answer made the status line
/// run and its windows are in `/sessions`.
async fn session_with_windows(
    five: (f64, u64),
    week: (f64, u64),
) -> Option<(TmuxServer, TestServer, Model, RealClaude)> {
    let (tmux, server, model, session) = real_session(FAST, Some([five, week])).await?;
    let used = (five.0 * 100.0).round();
    common::eventually_ok("the windows in /sessions", STEP, async || {
        let body = server.get_json("/sessions").await;
        match body["budgets"][0]["five_hour"]["used_percentage"].as_f64() {
            Some(shown) if shown.round() == used => Ok(()),
            _ => Err(format!("{body:#}\n{}", session.screen(&tmux))),
        }
    })
    .await;
    Some((tmux, server, model, session))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_under_used_window_near_its_end_gets_one_budget_nudge_and_its_turn_is_charged() {
    // 30 % of the 5-hour window used, 30 minutes left: inside the last 45.
    let five = (0.30, unix_in(Duration::from_secs(30 * 60)));
    let week = (0.20, unix_in(Duration::from_secs(3 * 86_400)));
    let Some((tmux, server, model, session)) = session_with_windows(five, week).await else {
        return;
    };
    let context = || format!("{}\n{}", model.transcript(), session.screen(&tmux));
    common::eventually_ok("the budget nudge told", STEP, async || {
        match model.told(BUDGET_NUDGE) {
            0 => Err(context()),
            _ => Ok(()),
        }
    })
    .await;
    // The regular nudges go on, acknowledged after two; the budget nudge never comes again.
    server
        .session_until(
            &session.sid,
            "acknowledged idle",
            STEP,
            |s| s["state"] == "acknowledged-idle",
            context,
        )
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(model.told(BUDGET_NUDGE), 1, "{}", context());
    assert_eq!(model.told(NUDGE_1), 1, "{}", context());

    // Each of those turns answered in one API call and called no tool: charged its 2,012
    // tokens (the stand-in's usage), counted as no answer.
    common::eventually_ok("the turns charged", STEP, async || {
        let metrics = server.get_text("/metrics").await;
        let charged = |kind: &str| {
            metrics
                .lines()
                .find_map(|l| {
                    l.strip_prefix(&format!(
                        "wakebridge_caused_tokens_total{{kind=\"{kind}\"}} "
                    ))
                })
                .map(str::to_owned)
        };
        match (charged("budget").as_deref(), charged("nudge").as_deref()) {
            (Some("2012"), Some("4024")) => Ok(()),
            found => {
                let listed = server.session(&session.sid).await;
                let path = listed["transcript_path"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let transcript = std::fs::read_to_string(&path).unwrap_or_default();
                let tail: Vec<&str> = transcript.lines().rev().take(6).collect();
                Err(format!("{found:?}\n{listed}\n{tail:#?}"))
            }
        }
    })
    .await;
    let body = server.get_json("/sessions").await;
    assert_eq!(body["today"]["nudges"], 3, "{body:#}");
    assert_eq!(body["today"]["caused_tokens"], 3 * 2012, "{body:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nearly_spent_window_stops_every_nudge_of_a_real_session() {
    let five = (0.93, unix_in(Duration::from_secs(2 * 3600)));
    let week = (0.50, unix_in(Duration::from_secs(3 * 86_400)));
    let Some((tmux, server, model, session)) = session_with_windows(five, week).await else {
        return;
    };
    let context = || format!("{}\n{}", model.transcript(), session.screen(&tmux));
    let spared = server
        .session_until(
            &session.sid,
            "spared",
            STEP,
            |s| {
                s["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("sparing it"))
            },
            context,
        )
        .await;
    assert!(
        spared["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("5-hour window 93% used"),
        "{spared}"
    );
    // Idle well past idle_after and two backoff gaps: nothing told.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(model.told(NUDGE_1), 0, "{}", context());
    assert_eq!(model.mentioned("Usage budget"), 0, "{}", context());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_real_session_gets_nothing_and_its_bus_event_is_told_once_unpaused() {
    let Some((tmux, server, model, session)) = real_session(FAST, None).await else {
        return;
    };
    let sid = session.sid.clone();
    let context = || format!("{}\n{}", model.transcript(), session.screen(&tmux));
    let (status, body) = server
        .post_json("/pause", json!({"session_ids": [sid]}))
        .await;
    assert_eq!(status, 200, "{body}");
    let (_, body) = server.hook(event_for(&sid, 1), &[]).await;
    assert_eq!(body["action"], "spool-paused", "{body}");
    // Idle past idle_after and the backoff: no nudge, no wake.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let paused = server.session(&sid).await;
    assert_eq!(
        (paused["state"].as_str(), paused["owed"]["events"].as_u64()),
        (Some("paused"), Some(1)),
        "{paused}"
    );
    assert_eq!(
        (model.told(NUDGE_1), model.told(WAKE_PROMPT)),
        (0, 0),
        "{}",
        context()
    );

    let (status, body) = server
        .post_json("/unpause", json!({"session_ids": [sid]}))
        .await;
    assert_eq!(status, 200, "{body}");
    common::eventually_ok("the wake told", STEP, async || {
        match model.told(WAKE_PROMPT) {
            0 => Err(context()),
            _ => Ok(()),
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(model.told(WAKE_PROMPT), 1, "{}", context());
    assert!(
        server.session(&sid).await["owed"].is_null(),
        "{}",
        context()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_its_active_hours_a_real_session_is_neither_nudged_nor_resumed_yet_woken() {
    // An hour-long window two hours from now, in the zone the daemon reads hours in.
    let hour = (jiff::Timestamp::now().to_zoned_datetime(jiff::tz::TimeZone::system())).hour();
    let hours = format!("{:02}:00-{:02}:00", (hour + 2) % 24, (hour + 3) % 24);
    let env: Vec<(&'static str, &str)> = FAST
        .iter()
        .copied()
        .chain([
            ("WAKEBRIDGE_SCHEDULE__ACTIVE_HOURS", hours.as_str()),
            ("WAKEBRIDGE_LIMITS__RESUME_GRACE", "1s"),
            ("WAKEBRIDGE_LIMITS__AUTO_CONTINUE_WAIT", "1s"),
        ])
        .collect();
    let Some((tmux, server, model, session)) = real_session(&env, None).await else {
        return;
    };
    let sid = session.sid.clone();
    let context = || format!("{}\n{}", model.transcript(), session.screen(&tmux));
    server
        .session_until(
            &sid,
            "quiet hours",
            STEP,
            |s| {
                s["reason"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("quiet hours until"))
            },
            context,
        )
        .await;
    // A bus event still wakes it.
    let (_, body) = server.hook(event_for(&sid, 1), &[]).await;
    assert_eq!(body["action"], "tmux", "{body}\n{}", context());
    common::eventually("the wake told", STEP, || model.told(WAKE_PROMPT) == 1).await;

    // At the 5-hour limit with a reset 5 s away: held, and past the reset not resumed.
    model.limit_until(unix_in(Duration::from_secs(5)));
    session.submit(&tmux, "One more thing.").await;
    server
        .session_until(
            &sid,
            "held at the limit",
            STEP,
            |s| s["state"] == "limited",
            context,
        )
        .await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let held = server.session(&sid).await;
    assert_eq!(held["state"], "limited", "{held}");
    assert_eq!(
        (model.told(NUDGE_1), model.told("continue")),
        (0, 0),
        "{}",
        context()
    );
}
