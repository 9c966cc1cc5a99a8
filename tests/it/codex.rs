//! The real Codex CLI (`@openai/codex` from npm; `.ci/run` installs it) running real turns
//! offline against a stand-in of the Responses API (`common::responses`): `wakebridge codex
//! install` and what wakebridge makes of a Codex session through its hooks (issue 46).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::common;
use crate::common::env::test_env;
use crate::common::harness::{TestServer, event_for};
use crate::common::responses::{REPLY, Responses};
use crate::common::rig::start_daemon_with;
use crate::common::tmux::TmuxServer;
use wakebridge::mux::WAKE_PROMPT;

/// A Codex home, a working directory and the private environment both the real Codex and
/// wakebridge run in.
struct Setup {
    root: Arc<tempfile::TempDir>,
    codex_home: PathBuf,
    work: PathBuf,
    env: BTreeMap<String, String>,
}

fn setup(model: &Responses) -> Setup {
    let root = Arc::new(common::tempdir());
    let (codex_home, work) = (root.path().join("codex-home"), root.path().join("work"));
    for dir in [&codex_home, &work, &root.path().join("home")] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(codex_home.join("config.toml"), model.codex_config()).unwrap();
    let env = test_env(
        root.path(),
        &[
            ("CODEX_HOME", &codex_home.display().to_string()),
            ("STUB_API_KEY", "stand-in-key"),
            ("PATH", &std::env::var("PATH").unwrap_or_default()),
        ],
    );
    Setup {
        root,
        codex_home,
        work,
        env,
    }
}

impl Setup {
    /// `wakebridge <args>` in this environment; its standard output.
    fn wakebridge(&self, args: &[&str]) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_wakebridge"))
            .args(args)
            .env_clear()
            .envs(&self.env)
            .output()
            .expect("run wakebridge");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "wakebridge {args:?}: {stdout}\n{stderr}"
        );
        stdout
    }

    /// One `codex exec` turn, its hooks trusted only as config.toml says.
    fn codex_turn(&self, codex: &Path, prompt: &str) {
        let out = Command::new(codex)
            .args(["exec", "--skip-git-repo-check", prompt])
            .current_dir(&self.work)
            .env_clear()
            .envs(&self.env)
            .output()
            .expect("run codex exec");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert!(stdout.contains(REPLY), "{stdout}\n{stderr}");
    }

    /// The sessions the daemon lists in this working directory.
    async fn sessions_here(&self) -> Vec<Value> {
        let server = TestServer::start_in(self.root.clone(), &[], Default::default()).await;
        let sessions = server.get_json("/sessions").await;
        server.stop().await;
        let listed = sessions["sessions"].as_array().cloned().unwrap_or_default();
        let here = self.work.display().to_string();
        listed.into_iter().filter(|s| s["cwd"] == here).collect()
    }
}

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
    setup.codex_turn(&codex, "say hello again");
    let sessions = setup.sessions_here().await;
    let [session] = sessions.as_slice() else {
        panic!("one Codex session: {sessions:?}");
    };
    assert_eq!(session["agent"], "codex", "{session}");
    assert_eq!(session["pane"], Value::Null, "{session}");
    assert_eq!(session["last_hook_event"], "Stop", "{session}");
    let transcript = session["transcript_path"].as_str().unwrap_or_default();
    let home = setup.codex_home.display().to_string();
    assert!(
        transcript.starts_with(&home) && transcript.contains("rollout-"),
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
    server.stop().await;
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

/// The longest any one step with the real Codex TUI may take on a loaded two-core machine.
const STEP: Duration = Duration::from_secs(60);
const NUDGE: &str = "Please continue with the task at hand.";

/// A real Codex TUI in a private tmux pane, with its hooks approved by `wakebridge codex
/// install --trust-hooks`. Dropped, it takes the app-server Codex started for its home with it
/// (that one outlives the TUI on purpose).
struct CodexTui {
    pane: String,
    home: PathBuf,
}

impl Drop for CodexTui {
    fn drop(&mut self) {
        let socket = wakebridge::codex::control::CONTROL_SOCKET;
        let daemon_socket = std::fs::canonicalize(self.home.join(socket));
        let home = self.home.display().to_string();
        let _ = Command::new("pkill").args(["-f", &home]).status();
        // Its socket lives in Codex's own directory under /tmp, outside the test's.
        if let Ok(daemon_socket) = daemon_socket {
            let mut lock = daemon_socket.clone().into_os_string();
            lock.push(".lock");
            let _ = std::fs::remove_file(&daemon_socket);
            let _ = std::fs::remove_file(lock);
        }
    }
}

impl CodexTui {
    fn start(codex: &Path, setup: &Setup, tmux: &TmuxServer) -> CodexTui {
        setup.wakebridge(&["codex", "install", "--trust-hooks"]);
        let mut words: Vec<String> = (setup.env.iter())
            .map(|(k, v)| format!("{k}='{v}'"))
            .collect();
        words.push("TERM=xterm-256color".into());
        let command = format!(
            "env -i {} '{}'; exec sleep 600",
            words.join(" "),
            codex.display()
        );
        let pane = tmux.new_pane_in(&setup.work, &command);
        CodexTui {
            pane,
            home: setup.codex_home.clone(),
        }
    }

    fn screen(&self, tmux: &TmuxServer) -> String {
        tmux.tmux(&["capture-pane", "-p", "-t", &self.pane])
    }

    /// Types `text` at the composer and submits it: two `send-keys`, as Codex needs.
    fn submit(&self, tmux: &TmuxServer, text: &str) {
        tmux.tmux(&["send-keys", "-t", &self.pane, "-l", text]);
        std::thread::sleep(Duration::from_millis(300));
        tmux.tmux(&["send-keys", "-t", &self.pane, "Enter"]);
    }
}

/// How many conversation requests end on a user message saying `text`: what the model was told.
fn told(model: &Responses, text: &str) -> usize {
    let last_user = |request: &Value| {
        let input = request["input"].as_array().cloned().unwrap_or_default();
        let user = input
            .into_iter()
            .rev()
            .find(|item| item["role"] == "user")?;
        let content = user["content"].as_array().cloned().unwrap_or_default();
        content
            .iter()
            .find_map(|c| c["text"].as_str().map(str::to_owned))
    };
    let said = |request: &Value| last_user(request).is_some_and(|t| t.starts_with(text));
    model.requests().iter().filter(|r| said(r)).count()
}

/// A Codex session in a TUI, which its hooks name but cannot place in a pane: a bus event
/// reaches it through Codex's control socket (a turn started in the idle TUI, the model told
/// once), and once it stays idle it is nudged the same way, the second nudge after the backoff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codex_tui_is_woken_and_nudged_through_its_control_socket() {
    let Some(codex) = common::real_codex() else {
        common::skip_or_fail("codex is not on PATH", common::GET_CODEX);
        return;
    };
    let model = Responses::start().await;
    let setup = setup(&model);
    let tmux = TmuxServer::start();
    let quick = [
        ("WAKEBRIDGE_NUDGER__IDLE_AFTER", "2s"),
        ("WAKEBRIDGE_NUDGER__POLL_INTERVAL", "200ms"),
        ("WAKEBRIDGE_NUDGER__BASE_COOLDOWN", "2s"),
    ];
    let server = start_daemon_with(&tmux, Some(setup.root.clone()), &quick).await;
    let tui = CodexTui::start(&codex, &setup, &tmux);
    let screen = || tui.screen(&tmux);
    common::eventually("its composer", STEP, || {
        screen().contains("Ask Codex to do anything")
    })
    .await;
    // Codex starts its session (and runs SessionStart) at the first prompt.
    tui.submit(&tmux, "say hello");
    let sid = common::eventually_ok("the session known through its hooks", STEP, async || {
        let sessions = server.get_json("/sessions").await;
        let live = sessions["sessions"].as_array().and_then(|all| {
            all.iter()
                .find(|s| s["agent"] == "codex" && s["inbox"]["live"] == true)
                .and_then(|s| s["session_id"].as_str().map(str::to_owned))
        });
        live.ok_or_else(|| format!("{sessions}\n{}", screen()))
    })
    .await;
    let known = server.session(&sid).await;
    assert!(
        known["pane"].is_null(),
        "its hooks cannot name its pane: {known}"
    );
    common::eventually("the first turn answered", STEP, || {
        screen().matches(REPLY).count() == 1
    })
    .await;

    let (_, body) = server.hook(event_for(&sid, 1), &[]).await;
    assert_eq!(body["action"], "inbox", "{body}\n{}", screen());
    common::eventually_ok("the wake told", STEP, async || {
        match told(&model, WAKE_PROMPT) {
            1 => Ok(()),
            n => Err(format!("told {n} times\n{}", screen())),
        }
    })
    .await;
    assert!(
        screen().contains(WAKE_PROMPT),
        "the TUI shows it: {}",
        screen()
    );
    common::eventually_ok("the nudge told", STEP, async || match told(&model, NUDGE) {
        0 => Err(format!("{}\n{}", server.session(&sid).await, screen())),
        _ => Ok(()),
    })
    .await;
    let series = |s: &Value| s["nudge"]["unanswered"].as_u64() >= Some(2);
    server
        .session_until(&sid, "a second unanswered nudge", STEP, series, screen)
        .await;
    assert_eq!(told(&model, WAKE_PROMPT), 1, "the wake was told once");
    let session = server.session(&sid).await;
    assert_eq!(session["last_action"], "inbox", "{session}");
    assert!(
        session["inbox"]["heard_at"].is_string(),
        "its hook heard it: {session}"
    );
}
