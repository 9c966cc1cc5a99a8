//! Telling a session through its own inbox (Claude Code 2.1.224+) instead of typing: first
//! against stand-in sockets for what the daemon does with an inbox that takes, refuses or is
//! gone, then against the real Claude Code and the scripted model: an idle session with a draft
//! at its prompt, a message during a running tool call, a session in no known pane, and the
//! typed fallback with the inbox turned off.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use wakebridge::mux::WAKE_PROMPT;

use crate::common;
use crate::common::claude::RealClaude;
use crate::common::harness::{TestServer, binary, event_for, fed};
use crate::common::model::{Model, Reply};
use crate::common::rig::start_daemon_with;
use crate::common::tmux::TmuxServer;

const TOKEN: &str = "0123456789abcdef0123456789abcdef";
/// The longest any one step with the real Claude Code may take on a loaded two-core machine.
const STEP: Duration = Duration::from_secs(60);
/// How long "nothing more is told" is watched.
const QUIET: Duration = Duration::from_secs(3);

/// A stand-in inbox: a socket in a private directory that keeps every line sent to it.
struct StandIn {
    socket: PathBuf,
    lines: Arc<Mutex<Vec<Value>>>,
}

/// `dir`, created with Claude Code's mode for its socket directory (0700).
fn private_dir(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    dir.to_path_buf()
}

impl StandIn {
    fn bind(dir: &Path) -> StandIn {
        let socket = private_dir(dir).join(format!("{}.sock", std::process::id()));
        let listener = tokio::net::UnixListener::bind(&socket).unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let kept = lines.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut text = String::new();
                let _ = stream.read_to_string(&mut text).await;
                let mut kept = kept.lock().unwrap();
                kept.extend(text.lines().filter_map(|l| serde_json::from_str(l).ok()));
            }
        });
        StandIn { socket, lines }
    }

    /// The texts of the `user` messages received so far.
    fn told(&self) -> Vec<String> {
        let lines = self.lines.lock().unwrap();
        lines
            .iter()
            .filter(|l| l["type"] == "user")
            .map(|l| l["message"]["content"].as_str().unwrap_or("").to_owned())
            .collect()
    }
}

/// Runs the real `wakebridge hook` for `sid` as a session whose inbox is `socket` fires it.
fn fire_hook(server: &TestServer, sid: &str, socket: &Path, payload: Value) {
    fire_hook_with(server, sid, socket, payload, &[]);
}

/// [`fire_hook`] with `extra` in the session's environment.
fn fire_hook_with(
    server: &TestServer,
    sid: &str,
    socket: &Path,
    payload: Value,
    extra: &[(&str, &str)],
) {
    let pid = std::process::id().to_string();
    let socket = socket.display().to_string();
    let mut env = vec![
        ("CLAUDE_CODE_MESSAGING_SOCKET", socket.as_str()),
        ("CLAUDE_CODE_MESSAGING_TOKEN", TOKEN),
        ("CLAUDE_PID", pid.as_str()),
    ];
    env.extend_from_slice(extra);
    let mut payload = payload;
    payload["session_id"] = json!(sid);
    let mut cmd = binary(server.root.path(), &env);
    cmd.arg("hook");
    assert!(fed(cmd, &payload.to_string()).status.success());
}

fn session_start() -> Value {
    json!({"hook_event_name": "SessionStart", "source": "startup", "cwd": "/work"})
}

fn prompt(text: &str) -> Value {
    json!({"hook_event_name": "UserPromptSubmit", "prompt": text, "cwd": "/work"})
}

/// With `[nudger] keep = "agents"`, a session with no pane is kept once it asked to be
/// (`WAKEBRIDGE=keep` at its start, as `wakebridge launch` starts agents) or the bus told it
/// something; until then it is watched, says so, and is never nudged, and the bus's events
/// still reach it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_keep_agents_a_session_is_watched_until_it_asks_or_is_told() {
    let tmux = TmuxServer::start();
    let settings = [
        ("WAKEBRIDGE_NUDGER__KEEP", "agents"),
        ("WAKEBRIDGE_NUDGER__IDLE_AFTER", "1s"),
        ("WAKEBRIDGE_NUDGER__POLL_INTERVAL", "200ms"),
    ];
    let server = start_daemon_with(&tmux, None, &settings).await;
    let socks = server.root.path().join("socks");
    let (mine, agent) = (
        StandIn::bind(&socks.join("a")),
        StandIn::bind(&socks.join("b")),
    );
    let stop = json!({"hook_event_name": "Stop", "cwd": "/work"});
    fire_hook(&server, "mine", &mine.socket, session_start());
    let opted_in = [("WAKEBRIDGE", "keep")];
    fire_hook_with(&server, "agent", &agent.socket, session_start(), &opted_in);
    fire_hook(&server, "mine", &mine.socket, stop.clone());
    fire_hook(&server, "agent", &agent.socket, stop);

    common::eventually("the agent nudged", STEP, || !agent.told().is_empty()).await;
    assert!(server.session("agent").await["watched"].is_null());
    let watched = server.session("mine").await;
    let why = watched["watched"].as_str().unwrap_or_default();
    assert!(why.contains("keep = \"agents\""), "{watched}");
    tokio::time::sleep(QUIET).await;
    assert!(mine.told().is_empty(), "a watched session is not nudged");

    // The bus's event reaches it all the same; told something, it is an agent to keep.
    let (_, body) = server.hook(event_for("mine", 1), &[]).await;
    assert_eq!(body["action"], "inbox", "{body}");
    let kept = server
        .session_until(
            "mine",
            "kept",
            STEP,
            |s| s["watched"].is_null(),
            String::new,
        )
        .await;
    assert!(kept["watched"].is_null(), "{kept}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_s_inbox_takes_the_wake_with_no_pane_and_a_turn_running() {
    let tmux = TmuxServer::start();
    let server = start_daemon_with(&tmux, None, &[]).await;
    let inbox = StandIn::bind(&server.root.path().join("socks"));
    let sid = "inbox-session";
    fire_hook(&server, sid, &inbox.socket, session_start());
    // A turn runs: its busy marker is fresh, which would hold a typed wake.
    fire_hook(&server, sid, &inbox.socket, prompt("Build the parser."));

    let (status, body) = server.hook(event_for(sid, 1), &[]).await;
    assert_eq!((status, &body["action"]), (200, &json!("inbox")), "{body}");
    common::eventually("the wake in the inbox", Duration::from_secs(5), || {
        inbox.told() == [WAKE_PROMPT]
    })
    .await;
    let lines = inbox.lines.lock().unwrap().clone();
    assert_eq!(lines[0], json!({"type": "auth", "token": TOKEN}));

    let session = server.session(sid).await;
    assert_eq!(session["state"], "working", "{session}");
    assert_eq!(session["inbox"]["live"], true, "{session}");
    assert!(session["inbox"]["last_sent_at"].is_string(), "{session}");
    assert_eq!(session["inbox"]["heard_at"], Value::Null, "not heard yet");
    assert!(session["owed"].is_null(), "nothing owed: {session}");
    assert!(
        !session.to_string().contains(TOKEN),
        "the token is never shown"
    );

    // Its UserPromptSubmit hook reports that very text: heard.
    fire_hook(&server, sid, &inbox.socket, prompt(WAKE_PROMPT));
    let heard = server.session(sid).await;
    assert!(heard["inbox"]["heard_at"].is_string(), "{heard}");

    // The same text again within 30 s would be dropped by Claude Code: it goes numbered.
    let (_, body) = server.hook(event_for(sid, 2), &[]).await;
    assert_eq!(body["action"], "inbox", "{body}");
    let second = format!("{WAKE_PROMPT} (#2)");
    common::eventually("the second wake", Duration::from_secs(5), || {
        inbox.told() == [WAKE_PROMPT, second.as_str()]
    })
    .await;
    assert!(server.session(sid).await["owed"].is_null());

    // A person's `wakebridge wake` goes the same way, and succeeds.
    let url = format!("http://{}", server.addr);
    let woken = binary(server.root.path(), &[])
        .args(["wake", sid, "--force", "--url", &url])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&woken.stdout);
    assert!(
        woken.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&woken.stderr)
    );
    assert_eq!(said.trim(), format!("{sid}: inbox"));
}

#[tokio::test]
async fn an_unpaused_session_only_its_inbox_reaches_is_told_what_waited() {
    let tmux = TmuxServer::start();
    let server = start_daemon_with(&tmux, None, &[]).await;
    let inbox = StandIn::bind(&server.root.path().join("socks"));
    let sid = "paused-inbox-session";
    fire_hook(&server, sid, &inbox.socket, session_start());
    let (status, _) = server
        .post_json("/pause", json!({"session_ids": [sid]}))
        .await;
    assert_eq!(status, 200);
    let (_, body) = server.hook(event_for(sid, 1), &[]).await;
    assert_eq!(body["action"], "spool-paused", "{body}");
    assert_eq!(server.session(sid).await["owed"]["events"], 1);

    let (status, _) = server
        .post_json("/unpause", json!({"session_ids": [sid]}))
        .await;
    assert_eq!(status, 200);
    common::eventually("the owed wake in the inbox", Duration::from_secs(5), || {
        inbox.told() == [WAKE_PROMPT]
    })
    .await;
    let paid = server.session(sid).await;
    assert!(paid["owed"].is_null(), "{paid}");
    assert_eq!(paid["paid"]["last_how"], "inbox", "{paid}");
}

#[tokio::test]
async fn an_inbox_whose_process_now_runs_another_session_is_not_used() {
    let tmux = TmuxServer::start();
    let server = start_daemon_with(&tmux, None, &[]).await;
    let inbox = StandIn::bind(&server.root.path().join("socks"));
    let sid = "ended-session";
    fire_hook(&server, sid, &inbox.socket, session_start());
    // Claude Code's registry says the announced pid runs another session now.
    let registry = server.root.path().join("home/.claude/sessions");
    std::fs::create_dir_all(&registry).unwrap();
    let pid = std::process::id();
    let entry = json!({"pid": pid, "sessionId": "another-session", "status": "idle"});
    std::fs::write(registry.join(format!("{pid}.json")), entry.to_string()).unwrap();

    let (_, body) = server.hook(event_for(sid, 1), &[]).await;
    assert_eq!(body["action"], "spool-unmapped", "{body}");
    assert!(inbox.told().is_empty(), "told another session");
    let session = server.session(sid).await;
    let problem = session["inbox"]["problem"].as_str().unwrap_or_default();
    assert!(problem.contains("now runs another session"), "{session}");
}

#[tokio::test]
async fn an_inbox_that_refuses_or_is_gone_is_reported_and_its_event_kept() {
    let tmux = TmuxServer::start();
    let server = start_daemon_with(&tmux, None, &[]).await;
    let socks = private_dir(&server.root.path().join("socks"));
    // Bound, then nobody listening: the socket is there and connecting is refused.
    let refusing = socks.join("1.sock");
    drop(std::os::unix::net::UnixListener::bind(&refusing).unwrap());
    let sid = "refusing-session";
    fire_hook(&server, sid, &refusing, session_start());

    let (status, body) = server.hook(event_for(sid, 1), &[]).await;
    assert_eq!(status, 200);
    assert_eq!(body["action"], "spool-mux-failed", "{body}");
    let session = server.session(sid).await;
    assert_eq!(session["last_error_kind"], "inbox-refused", "{session}");
    assert_eq!(session["owed"]["events"], 1, "kept for a later wake");
    assert_eq!(server.spool_lines(sid).len(), 1);

    // Gone: the session exited. No pane either: spooled only, and `/sessions` says why.
    std::fs::remove_file(&refusing).unwrap();
    let (_, body) = server.hook(event_for(sid, 2), &[]).await;
    assert_eq!(body["action"], "spool-unmapped", "{body}");
    let session = server.session(sid).await;
    assert_eq!(session["state"], "no-pane", "{session}");
    assert_eq!(session["inbox"]["live"], false, "{session}");
    let problem = session["inbox"]["problem"].as_str().unwrap_or_default();
    assert!(problem.contains("no inbox socket"), "{session}");
    assert_eq!(server.spool_lines(sid).len(), 2);
}

/// Claude Code's home for the real-session tests: Bash allowed, the hooks wired as `claude
/// install` wires them.
async fn start_real(
    claude: &Path,
    tmux: &TmuxServer,
    server: &TestServer,
    model: &Model,
    extra_env: &[String],
) -> RealClaude {
    let mut env = model.claude_env();
    env.extend(extra_env.iter().cloned());
    RealClaude::start(claude, tmux, server, &env).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_session_is_told_through_its_inbox_past_a_draft_and_mid_turn() {
    let Some(claude) = common::real_claude() else {
        common::skip_or_fail("no `claude` on PATH", common::GET_CLAUDE);
        return;
    };
    let model = Model::start().await;
    model.on(WAKE_PROMPT, Reply::text("Read the message."));
    model.on(
        "Run the slow step.",
        Reply {
            commands: vec!["sleep 20; echo slow-step-done".into()],
            text: "The slow step is done.".into(),
            context_pct: None,
        },
    );
    let tmux = TmuxServer::start();
    let server = start_daemon_with(&tmux, None, &[]).await;
    let session = start_real(&claude, &tmux, &server, &model, &[]).await;
    let sid = session.sid.clone();
    let context = || format!("{}\n{}", model.transcript(), session.screen(&tmux));
    let announced = server
        .session_until(
            &sid,
            "its inbox announced",
            STEP,
            |s| s["inbox"]["live"] == true,
            context,
        )
        .await;
    assert!(announced["pane"].is_object(), "{announced}");

    // 1. Idle, a human's draft at the prompt: told through the inbox, the draft never touched.
    const DRAFT: &str = "half a thought";
    tmux.tmux(&["send-keys", "-t", &session.pane, "-l", DRAFT]);
    common::eventually("the draft on screen", STEP, || {
        session.screen(&tmux).contains(DRAFT)
    })
    .await;
    let (_, body) = server.hook(event_for(&sid, 1), &[]).await;
    assert_eq!(body["action"], "inbox", "{body}\n{}", context());
    common::eventually_ok("the wake told", STEP, async || {
        match model.told(WAKE_PROMPT) {
            1 => Ok(()),
            _ => Err(context()),
        }
    })
    .await;
    server
        .session_until(
            &sid,
            "the wake heard",
            STEP,
            |s| s["inbox"]["heard_at"].is_string(),
            context,
        )
        .await;
    common::eventually("the turn over", STEP, || {
        !wakebridge::wakedir::is_busy(&server.wake_dir, &sid, 3600.0)
    })
    .await;
    assert!(session.screen(&tmux).contains(DRAFT), "{}", context());
    assert_eq!(
        model.mentioned(DRAFT),
        0,
        "the draft was sent:\n{}",
        context()
    );
    // The draft is the human's to clear.
    tmux.tmux(&["send-keys", "-t", &session.pane, "C-u"]);

    // 2. A turn runs a real 20 s tool call: the event goes at once and reaches the model in the
    // request that carries the tool's result, exactly once.
    session.submit(&tmux, "Run the slow step.").await;
    common::eventually("the tool call running", STEP, || {
        session.screen(&tmux).contains("sleep 20")
    })
    .await;
    let (_, body) = server.hook(event_for(&sid, 2), &[]).await;
    assert_eq!(body["action"], "inbox", "{body}\n{}", context());
    common::eventually_ok("told with the tool's result", STEP, async || {
        match model.mentioned_with(WAKE_PROMPT, "slow-step-done") {
            1 => Ok(()),
            _ => Err(context()),
        }
    })
    .await;
    common::eventually("the turn over", STEP, || {
        !wakebridge::wakedir::is_busy(&server.wake_dir, &sid, 3600.0)
    })
    .await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(model.mentioned(WAKE_PROMPT), 2, "{}", context());
    let after = server.session(&sid).await;
    assert!(
        after["owed"].is_null(),
        "nothing owed, so nothing typed later: {after}"
    );
}

/// ... and once its turn is over and it has been quiet for `idle_after`, nudged through it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_session_in_no_known_pane_is_woken_and_nudged_through_its_inbox() {
    let Some(claude) = common::real_claude() else {
        common::skip_or_fail("no `claude` on PATH", common::GET_CLAUDE);
        return;
    };
    let model = Model::start().await;
    model.on(WAKE_PROMPT, Reply::text("Read the message."));
    const NUDGE: &str = "Please continue with the task at hand.";
    model.on(NUDGE, Reply::text("Nothing left to do."));
    let tmux = TmuxServer::start();
    let quick = [
        ("WAKEBRIDGE_NUDGER__IDLE_AFTER", "2s"),
        ("WAKEBRIDGE_NUDGER__POLL_INTERVAL", "200ms"),
        ("WAKEBRIDGE_NUDGER__BASE_COOLDOWN", "2s"),
    ];
    let server = start_daemon_with(&tmux, None, &quick).await;
    let root = server.root.path();
    let hook = format!("{} hook", env!("CARGO_BIN_EXE_wakebridge"));
    let mut settings = wakebridge::cli::hook::settings_json(&hook);
    settings["permissions"] = json!({"allow": ["Bash"]});
    common::claude_home(&root.join("home"), &root.join("work"), &settings);
    // A terminal, but no multiplexer the session can name: TMUX and TMUX_PANE are not passed,
    // so its hooks map no pane and only the inbox reaches it.
    let mut words: Vec<String> = common::env::test_env(root, &[])
        .into_iter()
        .map(|(k, v)| format!("{k}='{v}'"))
        .collect();
    words.extend(["TERM=xterm-256color".into(), "PATH=/usr/bin:/bin".into()]);
    words.extend(model.claude_env());
    let pane = tmux.new_pane_in(
        &root.join("work"),
        &format!(
            "env -i {} '{}'; exec sleep 600",
            words.join(" "),
            claude.display()
        ),
    );
    let screen = || tmux.tmux(&["capture-pane", "-p", "-t", &pane]);
    let sid = common::eventually_ok("the session known through its hooks", STEP, async || {
        let sessions = server.get_json("/sessions").await;
        let live = sessions["sessions"].as_array().and_then(|all| {
            all.iter()
                .find(|s| s["inbox"]["live"] == true)
                .and_then(|s| s["session_id"].as_str().map(str::to_owned))
        });
        live.ok_or_else(|| format!("{sessions}\n{}", screen()))
    })
    .await;
    common::eventually("its prompt", STEP, || screen().contains('\u{276f}')).await;
    let known = server.session(&sid).await;
    assert!(known["pane"].is_null(), "{known}");
    assert_ne!(known["state"], "no-pane", "reachable: {known}");

    let (_, body) = server.hook(event_for(&sid, 1), &[]).await;
    assert_eq!(body["action"], "inbox", "{body}\n{}", screen());
    common::eventually_ok("the wake told", STEP, async || {
        match model.told(WAKE_PROMPT) {
            1 => Ok(()),
            _ => Err(format!("{}\n{}", model.transcript(), screen())),
        }
    })
    .await;
    common::eventually_ok("the nudge told", STEP, async || match model.told(NUDGE) {
        0 => Err(format!("{}\n{}", server.session(&sid).await, screen())),
        _ => Ok(()),
    })
    .await;
    // Its answer to a nudge is no answer (a turn without a tool call), and its own echo of the
    // nudge is not one either: the series goes on with the backoff rather than restarting.
    let series = |s: &Value| s["nudge"]["unanswered"].as_u64() >= Some(2);
    server
        .session_until(&sid, "a second unanswered nudge", STEP, series, screen)
        .await;
    assert_eq!(model.told(NUDGE), 1, "{}", model.transcript());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_its_inbox_turned_off_a_real_session_is_typed_into() {
    let Some(claude) = common::real_claude() else {
        common::skip_or_fail("no `claude` on PATH", common::GET_CLAUDE);
        return;
    };
    let model = Model::start().await;
    model.on(WAKE_PROMPT, Reply::text("Read the message."));
    let tmux = TmuxServer::start();
    let server = start_daemon_with(&tmux, None, &[]).await;
    let off = ["CLAUDE_CODE_HARBOR_KITE=0".to_owned()];
    let session = start_real(&claude, &tmux, &server, &model, &off).await;
    let known = server.session(&session.sid).await;
    assert!(known["inbox"].is_null(), "no inbox announced: {known}");
    let (_, body) = server.hook(event_for(&session.sid, 1), &[]).await;
    assert_eq!(body["action"], "tmux", "{body}\n{}", session.screen(&tmux));
    common::eventually_ok("the wake told", STEP, async || {
        match model.told(WAKE_PROMPT) {
            1 => Ok(()),
            _ => Err(format!("{}\n{}", model.transcript(), session.screen(&tmux))),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_a_bypass_mode_session_holds_waits_for_a_human_and_is_never_typed() {
    let Some(claude) = common::real_claude() else {
        common::skip_or_fail("no `claude` on PATH", common::GET_CLAUDE);
        return;
    };
    let model = Model::start().await;
    model.on(WAKE_PROMPT, Reply::text("Read the message."));
    let tmux = TmuxServer::start();
    let server = start_daemon_with(&tmux, None, &[]).await;
    let root = server.root.path();
    // Bypass mode, its first-use warning already accepted, `crossSessionInbound` unset: Claude
    // Code holds a message whose sender states no permission mode. (`IS_SANDBOX`: the tests may
    // run as root, where Claude Code refuses bypass mode outside a declared sandbox.)
    let hook = format!("{} hook", env!("CARGO_BIN_EXE_wakebridge"));
    let mut settings = wakebridge::cli::hook::settings_json(&hook);
    settings["skipDangerousModePermissionPrompt"] = json!(true);
    let global = json!({"bypassPermissionsModeAccepted": true});
    common::claude_home_with(&root.join("home"), &root.join("work"), &settings, &global);
    let mut env = model.claude_env();
    env.push("IS_SANDBOX=1".into());
    let session = RealClaude::launch_with_args(
        &claude,
        &tmux,
        &server,
        &env,
        "--dangerously-skip-permissions",
    )
    .await;
    let sid = session.sid.clone();
    let context = || format!("{}\n{}", model.transcript(), session.screen(&tmux));
    server
        .session_until(
            &sid,
            "its inbox announced",
            STEP,
            |s| s["inbox"]["live"] == true,
            context,
        )
        .await;

    let (_, body) = server.hook(event_for(&sid, 1), &[]).await;
    assert_eq!(body["action"], "inbox", "{body}\n{}", context());
    let held = server
        .session_until(
            &sid,
            "the message held",
            STEP,
            |s| s["inbox"]["held"] == true,
            context,
        )
        .await;
    assert_eq!(held["state"], "dialog", "{held}");

    // Another event: neither sent (one more to answer) nor typed into the dialog; owed.
    let (_, body) = server.hook(event_for(&sid, 2), &[]).await;
    assert_eq!(body["action"], "spool-busy", "{body}\n{}", context());
    tokio::time::sleep(QUIET).await;
    assert_eq!(model.mentioned(WAKE_PROMPT), 0, "{}", context());
    assert!(
        session
            .screen(&tmux)
            .contains("Held message from another session"),
        "{}",
        context()
    );
    assert_eq!(server.session(&sid).await["owed"]["events"], 1);

    // A human delivers it: told, heard, the hold over.
    tmux.tmux(&["send-keys", "-t", &session.pane, "Down"]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    tmux.tmux(&["send-keys", "-t", &session.pane, "Enter"]);
    common::eventually_ok("the message delivered", STEP, async || {
        match model.told(WAKE_PROMPT) {
            0 => Err(context()),
            _ => Ok(()),
        }
    })
    .await;
    // The hold over, what it owed goes to the inbox at once: the second message. (In bypass
    // mode Claude Code holds that one too, so "not held" may never be seen in between: the
    // owed count going to none is the step that always shows.)
    let paid = server
        .session_until(
            &sid,
            "what was owed sent once the hold was over",
            STEP,
            |s| s["owed"].is_null() || s["owed"]["events"] == 0,
            context,
        )
        .await;
    assert_eq!(paid["paid"]["by_typing"], 0, "nothing typed: {paid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checkpoint_warning_reaches_a_long_turn_between_tool_calls() {
    let Some(claude) = common::real_claude() else {
        common::skip_or_fail("no `claude` on PATH", common::GET_CLAUDE);
        return;
    };
    const CHECKPOINT: &str = "checkpoint now";
    let model = Model::start().await;
    // The turn's first response, a tool call, already reports 86 % of the window used.
    model.on(
        "Refactor everything.",
        Reply {
            commands: vec!["sleep 8; echo refactor-step-done".into()],
            text: "Refactored.".into(),
            context_pct: Some(86.0),
        },
    );
    let tmux = TmuxServer::start();
    let fast_context = [
        ("WAKEBRIDGE_CONTEXT__ENABLED", "true"),
        ("WAKEBRIDGE_CONTEXT__POLL_INTERVAL", "500ms"),
    ];
    let server = start_daemon_with(&tmux, None, &fast_context).await;
    let session = start_real(&claude, &tmux, &server, &model, &[]).await;
    let context = || format!("{}\n{}", model.transcript(), session.screen(&tmux));
    server
        .session_until(
            &session.sid,
            "its inbox announced",
            STEP,
            |s| s["inbox"]["live"] == true,
            context,
        )
        .await;

    // Told while the tool runs: in the request carrying its result, not after the turn.
    session.submit(&tmux, "Refactor everything.").await;
    common::eventually_ok(
        "the checkpoint with the tool's result",
        STEP,
        async || match model.mentioned_with(CHECKPOINT, "refactor-step-done") {
            1 => Ok(()),
            _ => Err(context()),
        },
    )
    .await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(model.mentioned(CHECKPOINT), 1, "told once: {}", context());
}
