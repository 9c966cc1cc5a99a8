//! Usage limits end to end: the daemon in process over real HTTP, a real tmux server on a
//! private socket, the scripted agent TUI (`common/fake_agent.py`) showing Claude Code's real
//! notice and limit menu and firing the real `wakebridge hook` binary (`StopFailure` with
//! `rate_limit`, the notice as its last message), and the SQLite ledger on disk. Held while
//! limited (a DM is spooled and owed, nothing typed, across a daemon restart); at the reset the
//! menu is dismissed by its wait option and `continue` typed once; a session that resumed on its
//! own gets nothing. The pure parts are `claude::limits`'s tests; the resume's arithmetic is
//! tests/it/session.rs's (paused clock); a session only its inbox reaches is resumed through it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use wakebridge::mux::WAKE_PROMPT;

use crate::common;
use crate::common::claude::RealClaude;
use crate::common::harness::event_for;
use crate::common::rig::{SID, session_until, spawn_agent, start_daemon_with};
use crate::common::tmux::TmuxServer;

/// Fast polls and a one-second grace, so a reset a few seconds away is resumed within the test.
const LIMIT_ENV: &[(&str, &str)] = &[
    ("WAKEBRIDGE_NUDGER__POLL_INTERVAL", "200ms"),
    ("WAKEBRIDGE_LIMITS__RESUME_GRACE", "1s"),
];

/// How long "nothing is typed" is watched.
const QUIET: Duration = Duration::from_secs(2);

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[tokio::test]
async fn a_limited_session_is_held_across_a_restart_then_resumed_once_through_its_menu() {
    let tmux = TmuxServer::start();
    let server = start_daemon_with(&tmux, None, LIMIT_ENV).await;
    let agent = spawn_agent(&tmux, &server, "busy", true);
    let limited_at = unix_now();
    agent.set("limit in 8s");
    let status = session_until(&server, "the limit in the ledger", |s| {
        s["state"] == "limited"
    })
    .await;
    assert_eq!(status["limit"]["kind"], "session limit", "{status}");
    assert_eq!(status["limit"]["seen_how"], "hook", "{status}");
    assert!(
        status["limit"]["shown"]
            .as_str()
            .is_some_and(|s| s.starts_with("resets ")),
        "{status}"
    );

    // Held: a DM is spooled and owed, nothing typed into the notice or the menu.
    let (_, body) = server.hook(event_for(SID, 1), &[]).await;
    assert_eq!(body["action"], "spool-busy");
    let metrics = server.get_text("/metrics").await;
    assert!(
        metrics.contains("wakebridge_limited_sessions 1"),
        "{metrics}"
    );

    // A restart in the middle keeps the limit (and what is owed).
    let root = server.stop().await;
    let server = start_daemon_with(&tmux, Some(root), LIMIT_ENV).await;
    assert_eq!(server.session(SID).await["state"], "limited");
    assert_eq!(server.session(SID).await["owed"]["events"], 1);

    let resumed = session_until(&server, "the resume", |s| s["limit"]["tries"] == 1).await;
    let submits = agent.submits();
    let texts: Vec<&str> = submits.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(texts, ["[menu] 1", "continue"], "{resumed}");
    assert!(
        submits[1].0 >= limited_at + 8.0 + 1.0 - 0.5,
        "typed before reset + grace: {submits:?}"
    );

    // The resumed turn runs and ends normally: the Stop hook lifts the hold and pays the DM.
    agent.set("busy");
    tokio::time::sleep(Duration::from_millis(300)).await;
    agent.set("idle");
    let after = session_until(&server, "the hold lifted", |s| s["limit"].is_null()).await;
    assert_eq!(after["paid"]["last_how"], "hook", "{after}");
    tokio::time::sleep(QUIET).await;
    let texts: Vec<String> = agent.submitted();
    assert_eq!(
        texts.iter().filter(|t| *t == "continue").count(),
        1,
        "{texts:?}"
    );
    assert!(
        !texts
            .iter()
            .any(|t| t == "[menu] enter" || t == WAKE_PROMPT),
        "{texts:?}"
    );
}

#[tokio::test]
async fn a_session_that_resumed_on_its_own_gets_nothing_typed() {
    let tmux = TmuxServer::start();
    let server = start_daemon_with(&tmux, None, LIMIT_ENV).await;
    let agent = spawn_agent(&tmux, &server, "busy", true);
    agent.set("limit in 3s");
    session_until(&server, "the limit", |s| s["state"] == "limited").await;
    // The menu is still open when Claude Code's own auto-continue takes over.
    agent.set("resumed");
    session_until(&server, "the hold lifted", |s| s["limit"].is_null()).await;
    tokio::time::sleep(Duration::from_secs(3) + QUIET).await;
    assert_eq!(agent.submitted(), Vec::<String>::new());
    assert_ne!(server.session(SID).await["state"], "limited");
}

#[tokio::test]
async fn a_notice_seen_only_on_the_screen_holds_the_session_and_is_recorded() {
    let tmux = TmuxServer::start();
    let server = start_daemon_with(
        &tmux,
        None,
        &[("WAKEBRIDGE_LIMITS__RESUME", "false"), LIMIT_ENV[0]],
    )
    .await;
    // No hooks: the notice reaches wakebridge only through the screen, read before typing.
    let agent = spawn_agent(&tmux, &server, "busy", false);
    agent.set("limit 3pm (Europe/London)");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, body) = server.hook(event_for(SID, 1), &[]).await;
    assert_eq!(body["action"], "spool-busy");
    let status = session_until(&server, "the limit from the screen", |s| {
        s["limit"]["seen_how"] == "screen"
    })
    .await;
    assert_eq!(status["limit"]["resets_text"], "3pm (Europe/London)");
    tokio::time::sleep(QUIET).await;
    assert_eq!(
        std::fs::read(&agent.record).expect("record"),
        b"",
        "nothing typed, not even into the menu (resume = false)"
    );
}

/// The installed Claude Code (on PATH; `.ci/run` installs it from npm) still writes its notices,
/// resets, menu and notifications the way `claude::limits` reads them: the fragments of its
/// binary each reader depends on, and the notice they compose, parsed.
#[test]
fn the_installed_claude_code_writes_what_claude_limits_reads() {
    let Some(bin) = common::real_claude() else {
        common::skip_or_fail("no `claude` on PATH", common::GET_CLAUDE);
        return;
    };
    for fragment in [
        // The notice: `You've hit your ${kind}${" · resets " + when}` (U+00B7 escaped).
        "`You've hit your ${",
        " \\xB7 resets ${",
        // The reset within a day: en-US hour, minutes only when not :00, then "3pm" (2.1.197
        // replaces " PM", 2.1.332 " PM" or "\u202fPM").
        "toLocaleTimeString(\"en-US\",{hour:\"numeric\",minute:",
        "([AP]M)/i",
        // Further out: month and day first.
        "{month:\"short\",day:\"numeric\",hour:",
        // The menu's wait option and the hook's error (`quota_auto_resume_fired`, read too, is
        // in 2.1.332, not yet in 2.1.197).
        "Stop and wait for limit to reset",
        "\"rate_limit\"",
        // The status line's windows.
        "five_hour",
        "seven_day",
    ] {
        // grep: a 245 MB binary is searched in a fraction of a second, not read into a test.
        let found = std::process::Command::new("grep")
            .args(["-a", "-F", "-q", "-e", fragment])
            .arg(&bin)
            .status()
            .expect("grep");
        assert!(
            found.success(),
            "{} no longer contains {fragment:?}: Claude Code changed how it shows a usage limit",
            bin.display()
        );
    }
    let composed = "You\u{2019}ve hit your session limit \u{b7} resets 3:45pm (Europe/London)";
    let notice = wakebridge::claude::limits::notice(composed).expect("the notice parses");
    assert_eq!(notice.kind, "session limit");
    assert_eq!(notice.resets.as_deref(), Some("3:45pm (Europe/London)"));
}

/// A stand-in for Anthropic's API that answers every request the way it answers a subscriber at
/// the 5-hour limit: 429 `rate_limit_error` with the unified rate-limit headers Claude Code reads
/// (`rejected`, the reset). Other methods (the start-up `HEAD /api/hello`) get 200 `{}`.
async fn api_at_its_limit(resets_at_s: u64) -> std::net::SocketAddr {
    use axum::http::{Method, StatusCode, header};
    use axum::response::IntoResponse;
    let answer = move |method: Method| async move {
        if method != Method::POST {
            return (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                "{}",
            )
                .into_response();
        }
        let reset = resets_at_s.to_string();
        let headers = [
            ("anthropic-ratelimit-unified-status", "rejected".to_owned()),
            ("anthropic-ratelimit-unified-reset", reset.clone()),
            ("anthropic-ratelimit-unified-5h-reset", reset),
            (
                "anthropic-ratelimit-unified-representative-claim",
                "five_hour".into(),
            ),
            ("anthropic-ratelimit-unified-5h-utilization", "1.0".into()),
            ("x-should-retry", "false".into()),
        ];
        let mut response = (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::CONTENT_TYPE, "application/json")],
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your account's rate limit."}}"#,
        )
            .into_response();
        for (name, value) in headers {
            response
                .headers_mut()
                .insert(name, value.parse().expect("header value"));
        }
        response
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = axum::Router::new().fallback(answer);
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// The real Claude Code (on PATH; `.ci/run` installs it from npm) signed in as a subscriber (a
/// dummy OAuth token) against [`api_at_its_limit`], with wakebridge's hooks: its first turn
/// meets the 5-hour limit for real. It draws its own notice and `StopFailure` reports it; the
/// daemon holds the session (a DM is spooled and owed) and types nothing into it.
#[tokio::test]
async fn real_claude_code_at_its_usage_limit_is_held_and_nothing_is_typed() {
    let Some(claude) = common::real_claude() else {
        common::skip_or_fail("no `claude` on PATH", common::GET_CLAUDE);
        return;
    };
    let resets_at_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        + 2 * 3600;
    let api = api_at_its_limit(resets_at_s).await;
    let tmux = TmuxServer::start();
    let server = start_daemon_with(&tmux, None, LIMIT_ENV).await;
    let env = [
        "CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-wakebridge-test-token".into(),
        format!("ANTHROPIC_BASE_URL=http://{api}"),
        "CLAUDE_CODE_MAX_RETRIES=0".into(),
    ];
    let claude = RealClaude::start(&claude, &tmux, &server, &env).await;
    let hooks = || claude.hooks();
    let screen = || claude.screen(&tmux);
    let sid = claude.sid.clone();
    claude.submit(&tmux, "hello").await;

    let limited = |s: &serde_json::Value| s["state"] == "limited";
    let started = std::time::Instant::now();
    let status = loop {
        let all = server.get_json("/sessions").await;
        let status = all["sessions"]
            .as_array()
            .and_then(|a| a.iter().find(|s| s["session_id"] == sid.as_str()).cloned())
            .unwrap_or_default();
        if limited(&status) {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "never limited: {status}\n{}\n{}",
            screen(),
            hooks()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // 2.1.197 calls this limit "session limit", 2.1.332 "5-hour limit".
    let kind = status["limit"]["kind"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        ["5-hour limit", "session limit"].contains(&kind.as_str()),
        "{status}"
    );
    // Drawn around the time its StopFailure hook ran, not necessarily before.
    let notice = format!("You've hit your {kind}");
    common::eventually("its notice on screen", Duration::from_secs(10), || {
        screen().contains(&notice)
    })
    .await;
    assert!(hooks().contains("\"StopFailure\""), "{}", hooks());
    // The reset as its notice shows it (to the minute), from whichever signal came first.
    let resets_at = status["limit"]["resets_at"].as_str().expect("a reset");
    let resets_at: SystemTime = humantime::parse_rfc3339(resets_at).expect("RFC 3339");
    let shown = resets_at
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    assert!(shown.abs_diff(resets_at_s) <= 60, "{status}");

    let (_, body) = server.hook(event_for(&sid, 1), &[]).await;
    assert_eq!(body["action"], "spool-busy", "{}", screen());
    tokio::time::sleep(QUIET).await;
    assert_eq!(
        hooks().matches("\"UserPromptSubmit\"").count(),
        1,
        "only the human's prompt was submitted:\n{}",
        hooks()
    );
}

/// The real Claude Code signed in as a subscriber against the scripted model, with the hooks
/// wired and the context monitor on (it reads the transcript's exact reset); `jitter_ms` is the
/// delay Claude Code's own auto-continue draws from after the reset (its feature flag's
/// `jitterMinMs`/`jitterMaxMs`, 30–90 s by default), seeded into its flag cache.
async fn limited_real_claude(
    claude: &std::path::Path,
    tmux: &TmuxServer,
    model: &common::model::Model,
    jitter_ms: (u64, u64),
    extra: &[(&'static str, &str)],
) -> (crate::common::harness::TestServer, RealClaude) {
    let mut env = vec![
        ("WAKEBRIDGE_CONTEXT__ENABLED", "true"),
        ("WAKEBRIDGE_CONTEXT__POLL_INTERVAL", "500ms"),
    ];
    env.extend_from_slice(LIMIT_ENV);
    env.extend_from_slice(extra);
    let server = start_daemon_with(tmux, None, &env).await;
    let global = serde_json::json!({"cachedGrowthBookFeatures": {"tengu_marble_heron": {
        "jitterMinMs": jitter_ms.0, "jitterMaxMs": jitter_ms.1}}});
    let session = RealClaude::start_with(claude, tmux, &server, &model.claude_env(), &global).await;
    (server, session)
}

/// [`limited_real_claude`] whose own auto-continue would fire only ten minutes after the reset,
/// with `auto_continue_wait` at 5 s: wakebridge resumes it.
async fn auto_continue_that_does_not_fire(
    claude: &std::path::Path,
    tmux: &TmuxServer,
    model: &common::model::Model,
) -> (crate::common::harness::TestServer, RealClaude) {
    let wait = [("WAKEBRIDGE_LIMITS__AUTO_CONTINUE_WAIT", "5s")];
    limited_real_claude(claude, tmux, model, (600_000, 600_000), &wait).await
}

/// Waits for the hold to lift after wakebridge's resume, then checks it went once: the model
/// was told `continue` once, Claude Code's own auto-continue never, and the session's prompts
/// were `expected`.
async fn resumed_once(
    server: &crate::common::harness::TestServer,
    session: &RealClaude,
    model: &common::model::Model,
    expected: [&str; 2],
    context: impl Fn() -> String,
) {
    let lifted = |s: &serde_json::Value| s["limit"].is_null();
    let what = "the hold lifted after the resume";
    (server.session_until(
        &session.sid,
        what,
        Duration::from_secs(60),
        lifted,
        &context,
    ))
    .await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(prompts(session), expected, "{}", context());
    assert_eq!(model.told("continue"), 1, "{}", context());
    assert_eq!(model.told(AUTO_CONTINUE_PROMPT), 0, "{}", context());
}

/// The prompts the session's `UserPromptSubmit` hook saw, in order.
fn prompts(session: &RealClaude) -> Vec<String> {
    session
        .hooks()
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|hook| hook["hook_event_name"] == "UserPromptSubmit")
        .filter_map(|hook| hook["prompt"].as_str().map(str::to_owned))
        .collect()
}

/// The start of the prompt Claude Code 2.1.332's own auto-continue submits.
const AUTO_CONTINUE_PROMPT: &str = "Your claude.ai usage limit has reset.";

/// Issue 28, parts 2 and 3, through the real Claude Code: its first turn meets the 5-hour
/// limit of the scripted model. The `StopFailure` hook's notice gives the reset to the minute,
/// the transcript's record to the second: the exact one is kept, whichever came first. Its own
/// auto-continue is armed (the default): wakebridge types nothing at reset + grace, Claude Code
/// continues by itself, the hold lifts, and the model was told to continue once.
#[tokio::test]
async fn real_claude_code_that_continues_by_itself_at_the_reset_gets_nothing_typed() {
    let Some(claude) = common::real_claude() else {
        common::skip_or_fail("no `claude` on PATH", common::GET_CLAUDE);
        return;
    };
    let model = common::model::Model::start().await;
    let tmux = TmuxServer::start();
    let (server, session) = limited_real_claude(&claude, &tmux, &model, (1_000, 2_000), &[]).await;
    let sid = session.sid.clone();
    // A reset that is not on a minute, so the minute and the exact second differ; set once the
    // session is up (its start may take a while on a loaded machine).
    let mut resets_at_s = common::model::unix_in(Duration::from_secs(20));
    if resets_at_s.is_multiple_of(60) {
        resets_at_s += 7;
    }
    model.limit_until(resets_at_s);
    session.submit(&tmux, "hello").await;
    let context = || format!("{}\n{}", model.transcript(), session.screen(&tmux));
    let status = server
        .session_until(
            &sid,
            "the exact reset",
            Duration::from_secs(30),
            |s| {
                s["limit"]["resets_at"]
                    .as_str()
                    .and_then(|at| humantime::parse_rfc3339(at).ok())
                    .and_then(|at| at.duration_since(UNIX_EPOCH).ok())
                    .is_some_and(|at| at.as_secs() == resets_at_s)
            },
            context,
        )
        .await;
    assert_eq!(status["state"], "limited", "{status}");
    // Claude Code continues by itself; the hold lifts; nothing of ours was typed.
    server
        .session_until(
            &sid,
            "the hold lifted",
            Duration::from_secs(90),
            |s| s["limit"].is_null(),
            context,
        )
        .await;
    common::eventually(
        "the continued turn answered",
        Duration::from_secs(20),
        || model.answered(200) >= 1,
    )
    .await;
    tokio::time::sleep(QUIET).await;
    let prompts = prompts(&session);
    assert_eq!(prompts.len(), 2, "{prompts:?}\n{}", context());
    assert_eq!(prompts[0], "hello");
    assert!(prompts[1].starts_with(AUTO_CONTINUE_PROMPT), "{prompts:?}");
    assert_eq!(model.told(AUTO_CONTINUE_PROMPT), 1, "{}", context());
    assert!(session.hooks().contains("quota_auto_resume_fired"));
}

/// Issue 28, part 3, the other case: Claude Code's auto-continue is armed but does not fire
/// (its jitter here is ten minutes; in the field, a detached tmux or several sessions at once).
/// Its footer reads `Continuing shortly · Esc to cancel` from the reset on; that is no dialog.
/// wakebridge gives it `auto_continue_wait`, then types the resume once through the footer; the
/// model is told `continue` once, answers, and the hold lifts.
#[tokio::test]
async fn real_claude_code_whose_auto_continue_does_not_fire_is_resumed_once_after_the_wait() {
    let Some(claude) = common::real_claude() else {
        common::skip_or_fail("no `claude` on PATH", common::GET_CLAUDE);
        return;
    };
    let model = common::model::Model::start().await;
    let tmux = TmuxServer::start();
    let (server, session) = auto_continue_that_does_not_fire(&claude, &tmux, &model).await;
    let sid = session.sid.clone();
    model.limit_until(common::model::unix_in(Duration::from_secs(10)));
    session.submit(&tmux, "hello").await;
    let context = || format!("{}\n{}", model.transcript(), session.screen(&tmux));
    server
        .session_until(
            &sid,
            "limited",
            Duration::from_secs(30),
            |s| s["state"] == "limited",
            context,
        )
        .await;
    common::eventually(
        "the footer after the reset",
        Duration::from_secs(30),
        || session.screen(&tmux).contains("Continuing shortly"),
    )
    .await;
    resumed_once(&server, &session, &model, ["hello", "continue"], context).await;
}

/// The same with no pane (its mapping cleared, so only its inbox reaches it): no screen shows
/// whether Claude Code's auto-continue is armed, so wakebridge waits `auto_continue_wait` after
/// the reset and sends the resume through the inbox. The model is told `continue` once, the
/// hold lifts, and nothing was typed.
#[tokio::test]
async fn real_claude_code_in_no_known_pane_is_resumed_through_its_inbox_after_the_wait() {
    let Some(claude) = common::real_claude() else {
        common::skip_or_fail("no `claude` on PATH", common::GET_CLAUDE);
        return;
    };
    let model = common::model::Model::start().await;
    let tmux = TmuxServer::start();
    let (server, session) = auto_continue_that_does_not_fire(&claude, &tmux, &model).await;
    let sid = session.sid.clone();
    let context = || format!("{}\n{}", model.transcript(), session.screen(&tmux));
    let cleared = crate::common::harness::binary(server.root.path(), &[])
        .args(["panes", "clear", "--session", &sid, "--keep-pane-entries"])
        .output()
        .expect("run wakebridge panes clear");
    assert!(cleared.status.success(), "{cleared:?}");
    server
        .session_until(
            &sid,
            "reached by its inbox alone",
            Duration::from_secs(30),
            |s| s["pane"].is_null() && s["inbox"]["live"] == true,
            context,
        )
        .await;
    model.limit_until(common::model::unix_in(Duration::from_secs(10)));
    let (_, body) = server.hook(event_for(&sid, 1), &[]).await;
    assert_eq!(body["action"], "inbox", "{body}\n{}", context());
    server
        .session_until(
            &sid,
            "limited",
            Duration::from_secs(30),
            |s| s["state"] == "limited",
            context,
        )
        .await;
    resumed_once(
        &server,
        &session,
        &model,
        [WAKE_PROMPT, "continue"],
        context,
    )
    .await;
    let typed = session.screen(&tmux);
    assert!(!typed.contains("❯ continue"), "typed, not sent:\n{typed}");
}
