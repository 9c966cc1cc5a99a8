//! The real Codex CLI (`@openai/codex` from npm; `.ci/run` installs it) running real turns
//! offline against a stand-in of the Responses API (`common::responses`): `wakebridge codex
//! install` and what wakebridge makes of a Codex session through its hooks (issue 46).

use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use wakebridge::launch::{LaunchError, LaunchOptions, Placement, launch};
use wakebridge::mux::WAKE_PROMPT;

use crate::common;
use crate::common::codex::{CodexTui, setup};
use crate::common::day::STEP;
use crate::common::harness::{TestServer, event_for};
use crate::common::responses::Responses;
use crate::common::rig::start_daemon_with;
use crate::common::tmux::TmuxServer;

/// `wakebridge codex install` wires the hooks, but Codex runs none until they are approved: a
/// turn then leaves no session. With `--trust-hooks` the approval Codex itself would write is
/// in config.toml, and the next turn's SessionStart and Stop hooks run `wakebridge hook --agent
/// codex`: `/sessions` lists a Codex session with its rollout and no pane (Codex's hooks cannot
/// tell one). Uninstall puts both files back as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_install_wires_its_hooks_and_trust_hooks_approves_them() {
    let Some(codex) = common::real_codex() else {
        common::skip_or_fail("codex is not on PATH", common::GET_CODEX);
        return;
    };
    let model = Responses::start().await;
    let setup = setup(&model);
    let config = setup.codex_home.join("config.toml");
    let config_before = std::fs::read(&config).unwrap();

    let said = setup.wakebridge(&["codex", "install"]);
    assert!(said.contains("Hooks need review"), "{said}");
    let codex_line = |doctor: std::process::Output| {
        let text = String::from_utf8_lossy(&doctor.stdout).into_owned();
        let line = text
            .lines()
            .find(|l| l.contains("codex"))
            .map(str::to_owned);
        line.unwrap_or_else(|| panic!("no codex line:\n{text}"))
    };
    let line = codex_line(setup.wakebridge_out(&["doctor"]));
    assert!(
        line.starts_with("warn") && line.contains("0 of 4 approved"),
        "{line}"
    );
    assert!(setup.codex_home.join("hooks.json").exists());
    assert_eq!(
        std::fs::read(&config).unwrap(),
        config_before,
        "no trust asked for"
    );
    setup.codex_turn(&codex, "say hello");
    assert_eq!(model.requests().len(), 1, "one turn, one request");
    let untrusted = setup.sessions_here().await;
    assert!(untrusted.is_empty(), "hooks ran untrusted: {untrusted:?}");

    let said = setup.wakebridge(&["codex", "install", "--trust-hooks"]);
    assert!(said.contains("4 hooks are approved"), "{said}");
    let line = codex_line(setup.wakebridge_out(&["doctor"]));
    assert!(
        line.starts_with("ok") && line.contains("approved"),
        "{line}"
    );
    setup.codex_turn(&codex, "say hello again");
    let sessions = setup.sessions_here().await;
    let [session] = sessions.as_slice() else {
        panic!("one Codex session: {sessions:?}");
    };
    assert_eq!(session["agent"], "codex", "{session}");
    let sid = session["session_id"].as_str().unwrap_or_default();
    assert!(
        transcript_of(session).ends_with(&format!("-{sid}.jsonl")),
        "known by its thread's id, not the bus id its environment carries: {session}"
    );
    assert_eq!(session["pane"], Value::Null, "{session}");
    assert_eq!(session["last_hook_event"], "Stop", "{session}");
    let transcript = session["transcript_path"].as_str().unwrap_or_default();
    let codex_home = setup.codex_home.display().to_string();
    assert!(
        transcript.starts_with(&codex_home) && transcript.contains("rollout-"),
        "{session}"
    );

    // Its context, from the rollout: the response's total against Codex's own window.
    let server = TestServer::start_in(setup.root.clone(), &[], Default::default()).await;
    let sid = session["session_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let context = common::eventually_ok("its context read", STEP, async || {
        let context = server.session(&sid).await["context"].clone();
        match context["used_tokens"].is_u64() {
            true => Ok(context),
            false => Err(format!("{}", server.session(&sid).await)),
        }
    })
    .await;
    // Its account's windows, from the same lines: the 5-hour one at 12.5 %, the week at 40.
    let home = setup.codex_home.display().to_string();
    let budget = common::eventually_ok("its windows in the budget", STEP, async || {
        let listed = server.get_json("/sessions").await;
        let budgets = listed["budgets"].as_array().cloned().unwrap_or_default();
        let ours = budgets.into_iter().find(|b| b["account"] == home.as_str());
        ours.ok_or_else(|| format!("{}", listed["budgets"]))
    })
    .await;
    server.stop().await;
    assert_eq!(budget["five_hour"]["used_percentage"], 12.5, "{budget}");
    assert_eq!(budget["seven_day"]["used_percentage"], 40.0, "{budget}");
    assert_eq!(context["used_tokens"], 1290, "{context}");
    assert_eq!(context["source"], "transcript", "{context}");
    let window = context["context_window"].as_u64().unwrap_or_default();
    assert!(window > 100_000, "Codex's window for the model: {context}");

    setup.wakebridge(&["codex", "uninstall"]);
    assert!(
        !setup.codex_home.join("hooks.json").exists(),
        "there was none"
    );
    let config_after = String::from_utf8(std::fs::read(&config).unwrap()).unwrap();
    let config_before = String::from_utf8(config_before).unwrap();
    // Codex writes its own settings there too; none of wakebridge's approvals stay.
    assert!(!config_after.contains("hooks.state"), "{config_after}");
    assert!(config_after.starts_with(&config_before), "{config_after}");
}

/// A `codex exec` turn runs outside Codex's shared app-server, so its control socket cannot
/// reach it; mapped by hand (`wakebridge panes set`) to a pane that is not its own and busy, a
/// bus event that arrives mid-turn is owed, and its Stop hook pays it by keeping the turn going
/// with the wake prompt as its reason (Codex honours a Stop hook's `block`, and hands the reason
/// to the model as a `<hook_prompt>`). Told once, paid by the hook; and idle, nothing is typed
/// into that pane either: it shows no Codex composer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owed_wake_is_paid_at_a_codex_turn_s_stop_hook() {
    let Some(codex) = common::real_codex() else {
        common::skip_or_fail("codex is not on PATH", common::GET_CODEX);
        return;
    };
    let model = Responses::start().await;
    model.slow("work slowly", Duration::from_secs(6));
    let setup = setup(&model);
    setup.wakebridge(&["codex", "install", "--trust-hooks"]);
    let tmux = TmuxServer::start();
    let server = start_daemon_with(&tmux, Some(setup.root.clone()), &[]).await;
    let turn = {
        let (setup, codex) = (setup.clone(), codex.clone());
        std::thread::spawn(move || setup.codex_turn(&codex, "work slowly"))
    };
    // Nothing reaches it but its hooks: shown as no pane, its turn running all the same.
    let sid = common::eventually_ok("the turn running", STEP, async || {
        let sessions = setup.sessions_of(&server).await;
        let busy = sessions.iter().find_map(|s| {
            let sid = s["session_id"].as_str()?;
            wakebridge::wakedir::is_busy(&server.wake_dir, sid, 3600.0).then(|| sid.to_owned())
        });
        busy.ok_or_else(|| format!("{sessions:?}"))
    })
    .await;
    let pane = tmux.keeper_pane();
    let map = [
        "panes",
        "set",
        "--keep-wake-state",
        "--session",
        &sid,
        "--mux",
        "tmux",
    ];
    setup.wakebridge(&[&map[..], &["--pane", &pane]].concat());
    let (_, body) = server.hook(event_for(&sid, 1), &[]).await;
    assert_eq!(body["action"], "spool-busy", "{body}");
    turn.join().expect("the codex turn");
    assert_eq!(model.mentioned(WAKE_PROMPT), 1, "{}", model.transcript());
    assert_eq!(model.mentioned("<hook_prompt"), 1, "{}", model.transcript());
    let paid = common::eventually_ok("paid by the hook", STEP, async || {
        let session = server.session(&sid).await;
        match session["paid"]["by_hook"] == 1 {
            true => Ok(session),
            false => Err(format!("{session}")),
        }
    })
    .await;
    assert!(paid["owed"].is_null(), "{paid}");
    assert_eq!(paid["paid"]["by_typing"], 0, "{paid}");
    // Idle now, mapped by hand to a pane where nothing holds its rollout: nothing is typed
    // there, and the event is owed to its next Stop.
    let (_, body) = server.hook(event_for(&sid, 2), &[]).await;
    assert_eq!(body["action"], "spool-stale-pane", "{body}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let screen = tmux.tmux(&["capture-pane", "-p", "-t", &pane]);
    assert!(
        !screen.contains(WAKE_PROMPT),
        "typed into its pane: {screen}"
    );
    let owed = server.session(&sid).await;
    assert_eq!(owed["owed"]["events"], 1, "{owed}");
    server.stop().await;
}

/// `wakebridge launch -- codex` in a git repository: it answers Codex's "Trust this folder?"
/// (the folder is then trusted in config.toml), and stops at "Hooks need review" for a person,
/// since approving hooks is theirs to decide; with wakebridge's hooks approved beforehand it
/// reaches the composer, and a first prompt is typed there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launch_passes_codex_s_first_screens_and_leaves_its_hooks_to_a_person() {
    let Some(codex) = common::real_codex() else {
        common::skip_or_fail("codex is not on PATH", common::GET_CODEX);
        return;
    };
    let model = Responses::start().await;
    let setup = setup(&model);
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&setup.work)
        .status();
    assert!(git.is_ok_and(|s| s.success()), "git init");
    let tmux = TmuxServer::start();
    for (name, value) in &setup.env {
        tmux.tmux(&["set-environment", "-g", name, value]);
    }
    let _reaper = Reaper(setup.codex_home.clone());
    setup.wakebridge(&["codex", "install"]);
    let options = |name: &str| LaunchOptions {
        cwd: setup.work.clone(),
        name: Some(name.to_owned()),
        command: vec![codex.display().to_string()],
        prompt: None,
        pre_trust: None,
        timeout: STEP,
        wake_dir: None,
        session_id: None,
        claude_home: None,
        placement: Placement::NewSession,
        mux: tmux.config(),
    };
    let held = launch(&options("first")).await;
    let Err(LaunchError::HumanNeeded { what, .. }) = &held else {
        panic!("{held:?}");
    };
    assert!(
        what.contains("hooks") && what.contains("--trust-hooks"),
        "{what}"
    );
    let config = std::fs::read_to_string(setup.codex_home.join("config.toml")).unwrap();
    assert!(config.contains("trust_level = \"trusted\""), "{config}");

    setup.wakebridge(&["codex", "install", "--trust-hooks"]);
    let ready = launch(&options("second")).await.expect("ready");
    let screen = tmux.tmux(&["capture-pane", "-p", "-t", &ready.pane]);
    assert!(screen.contains("Ask Codex to do anything"), "{screen}");
    assert_eq!(ready.session_id, None, "known from its first hook, not now");

    // A first prompt is typed into its composer, read as Codex draws it, and submitted once.
    let mut with_prompt = options("third");
    with_prompt.prompt = Some(wakebridge::mux::KeystrokeText::new("say launched").unwrap());
    let prompted = launch(&with_prompt).await.expect("prompted");
    common::eventually("the first prompt told", STEP, || {
        model.told("say launched") == 1
    })
    .await;
    let screen = tmux.tmux(&["capture-pane", "-p", "-t", &prompted.pane]);
    let draft = wakebridge::codex::screen::read(&screen).draft;
    assert_eq!(draft, None, "left on its composer: {screen}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(model.told("say launched"), 1, "{}", model.transcript());
}

/// A Codex TUI given a `-c` override runs its thread in its own process, out of reach of the
/// shared control socket, and its hooks in its own pane's environment: its pane is known from
/// its first hook, and a bus event is typed into its composer once it is idle, as Claude Code's
/// is. Mid-turn nothing is typed (its composer shows under "esc to interrupt"): the event waits
/// and is told at its Stop hook, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codex_tui_off_the_control_socket_is_typed_into_when_idle() {
    let Some(codex) = common::real_codex() else {
        common::skip_or_fail("codex is not on PATH", common::GET_CODEX);
        return;
    };
    let model = Responses::start().await;
    model.slow("work slowly", Duration::from_secs(6));
    let setup = setup(&model);
    let tmux = TmuxServer::start();
    let server = start_daemon_with(&tmux, Some(setup.root.clone()), &[]).await;
    let tui = CodexTui::start_with(&codex, &setup, &tmux, &["-c", "hide_agent_reasoning=true"]);
    let screen = || tui.screen(&tmux);
    common::eventually("its composer", STEP, || {
        screen().contains("Ask Codex to do anything")
    })
    .await;
    tui.submit(&tmux, "say hello");
    let session = common::eventually_ok("known from its hooks, with its pane", STEP, async || {
        let sessions = setup.sessions_of(&server).await;
        let mapped = sessions
            .iter()
            .find(|s| s["agent"] == "codex" && s["pane"].is_object());
        mapped
            .cloned()
            .ok_or_else(|| format!("{sessions:?}\n{}", screen()))
    })
    .await;
    let sid = session["session_id"].as_str().unwrap().to_owned();
    assert_eq!(session["pane"]["pane"], tui.pane.as_str(), "{session}");
    assert!(
        session["inbox"]["live"] != true,
        "not served by the socket: {session}"
    );
    common::eventually("the first turn answered", STEP, || {
        model.told("say hello") == 1
    })
    .await;
    common::eventually("idle again", STEP, || {
        !wakebridge::wakedir::is_busy(&server.wake_dir, &sid, 3600.0)
    })
    .await;

    let (_, body) = server.hook(event_for(&sid, 1), &[]).await;
    assert_eq!(body["action"], "tmux", "{body}\n{}", screen());
    common::eventually("the wake answered", STEP, || model.told(WAKE_PROMPT) == 1).await;

    // Mid-turn: held back, owed, and told at the turn's Stop hook instead.
    tui.submit(&tmux, "work slowly");
    common::eventually("working", STEP, || screen().contains("esc to interrupt")).await;
    let (_, body) = server.hook(event_for(&sid, 2), &[]).await;
    assert_eq!(body["action"], "spool-busy", "{body}\n{}", screen());
    common::eventually("paid at its Stop hook", STEP, || {
        model.mentioned("<hook_prompt") == 1
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(model.mentioned(WAKE_PROMPT), 2, "{}", model.transcript());
    let left = wakebridge::codex::screen::read(&screen()).draft;
    assert_eq!(left, None, "left on its composer: {}", screen());

    // Killed outright, it maps its pane away from nothing: a Codex started there next shows the
    // same composer but holds another rollout, and is told nothing of the first one's.
    tui.crash_and_respawn(&codex, &setup, &tmux, &[]);
    common::eventually("the next Codex's composer", STEP, || {
        wakebridge::codex::screen::composer_shown(&screen())
    })
    .await;
    let (_, body) = server.hook(event_for(&sid, 3), &[]).await;
    assert_eq!(body["action"], "spool-stale-pane", "{body}\n{}", screen());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(model.mentioned(WAKE_PROMPT), 2, "{}", model.transcript());
    let left = wakebridge::codex::screen::read(&screen()).draft;
    assert_eq!(left, None, "typed into the next Codex: {}", screen());
    server.stop().await;
}

/// Stops the Codex processes of a home when the test ends, however it ends.
struct Reaper(std::path::PathBuf);

impl Drop for Reaper {
    fn drop(&mut self) {
        common::codex::reap(&self.0);
    }
}

/// The rollout path `/sessions` shows for `session`.
fn transcript_of(session: &Value) -> String {
    session["transcript_path"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
