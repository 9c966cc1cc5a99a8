//! The real Codex CLI (`@openai/codex`, which `.ci/run` installs) against the Responses
//! stand-in: a private Codex home and environment shared by Codex and wakebridge, and a Codex
//! TUI in a private tmux pane with its hooks approved by `wakebridge codex install`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::env::test_env;
use super::harness::TestServer;
use super::responses::{REPLY, Responses};
use super::tmux::TmuxServer;

/// A Codex home, a working directory and the private environment both the real Codex and
/// wakebridge run in.
#[derive(Clone)]
pub struct Setup {
    pub root: Arc<tempfile::TempDir>,
    pub codex_home: PathBuf,
    pub work: PathBuf,
    pub env: BTreeMap<String, String>,
}

/// The bus id in the environment Codex and every hook it runs share.
pub const SHARED_BUS_ID: &str = "the-first-tui";

pub fn setup(model: &Responses) -> Setup {
    let root = Arc::new(super::tempdir());
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
            // What the first TUI's shell may carry, and Codex's shared app-server hands to every
            // hook: no session may be known by it.
            ("AGENT_EVENT_BUS_SESSION_ID", SHARED_BUS_ID),
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
    /// `wakebridge <args>` in this environment, whatever its exit; its standard output.
    pub fn wakebridge_out(&self, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_wakebridge"))
            .args(args)
            .env_clear()
            .envs(&self.env)
            .output()
            .expect("run wakebridge")
    }

    /// `wakebridge <args>` in this environment, which must succeed; its standard output.
    pub fn wakebridge(&self, args: &[&str]) -> String {
        let out = self.wakebridge_out(args);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "wakebridge {args:?}: {stdout}\n{stderr}"
        );
        stdout
    }

    /// One `codex exec` turn, its hooks trusted only as config.toml says. It runs its thread in
    /// its own process, in the environment it was started from: here one with a bus id and
    /// `WAKEBRIDGE=keep`, as another agent's pane would hand it.
    pub fn codex_turn(&self, codex: &Path, prompt: &str) {
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

    /// The sessions `server` lists in this working directory.
    pub async fn sessions_of(&self, server: &TestServer) -> Vec<Value> {
        let sessions = server.get_json("/sessions").await;
        let listed = sessions["sessions"].as_array().cloned().unwrap_or_default();
        let here = self.work.display().to_string();
        listed.into_iter().filter(|s| s["cwd"] == here).collect()
    }

    /// The sessions a daemon started on this root lists in this working directory.
    pub async fn sessions_here(&self) -> Vec<Value> {
        let server = TestServer::start_in(self.root.clone(), &[], Default::default()).await;
        let sessions = self.sessions_of(&server).await;
        server.stop().await;
        sessions
    }
}

/// A real Codex TUI in a private tmux pane, with its hooks approved by `wakebridge codex
/// install --trust-hooks`. Dropped, it takes the app-server Codex started for its home with it
/// (that one outlives the TUI on purpose).
pub struct CodexTui {
    pub pane: String,
    home: PathBuf,
}

impl Drop for CodexTui {
    fn drop(&mut self) {
        reap(&self.home);
    }
}

/// Stops every Codex process of the home `home` (the TUIs and the app-server they started, which
/// outlives them on purpose) and removes its socket from Codex's own directory under /tmp.
pub fn reap(home: &Path) {
    let socket = wakebridge::codex::control::CONTROL_SOCKET;
    let daemon_socket = std::fs::canonicalize(home.join(socket));
    let _ = Command::new("pkill")
        .args(["-f", &home.display().to_string()])
        .status();
    if let Ok(daemon_socket) = daemon_socket {
        let mut lock = daemon_socket.clone().into_os_string();
        lock.push(".lock");
        let _ = std::fs::remove_file(&daemon_socket);
        let _ = std::fs::remove_file(lock);
    }
}

impl CodexTui {
    pub fn start(codex: &Path, setup: &Setup, tmux: &TmuxServer) -> CodexTui {
        CodexTui::start_with(codex, setup, tmux, &[])
    }

    /// As [`CodexTui::start`], `codex` given `args` and its pane's `TMUX_PANE` (a TUI given `-c`
    /// overrides runs its thread in its own process, its hooks in its pane's environment).
    pub fn start_with(codex: &Path, setup: &Setup, tmux: &TmuxServer, args: &[&str]) -> CodexTui {
        setup.wakebridge(&["codex", "install", "--trust-hooks"]);
        let pane = tmux.new_pane_in(&setup.work, &CodexTui::command(codex, setup, args));
        CodexTui {
            pane,
            home: setup.codex_home.clone(),
        }
    }

    /// Kills every process on its pane outright (no hook runs), as a crash or `kill -9` would,
    /// and starts `codex` given `args` in the same pane.
    pub fn crash_and_respawn(&self, codex: &Path, setup: &Setup, tmux: &TmuxServer, args: &[&str]) {
        let pane = self.pane.as_str();
        tmux.tmux(&["set-option", "-p", "-t", pane, "remain-on-exit", "on"]);
        let tty = tmux.tmux(&["display-message", "-p", "-t", pane, "#{pane_tty}"]);
        let tty = tty.trim_start_matches("/dev/");
        let _ = Command::new("pkill").args(["-KILL", "-t", tty]).status();
        let dead = || tmux.tmux(&["display-message", "-p", "-t", pane, "#{pane_dead}"]) == "1";
        for _ in 0..100 {
            if dead() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            dead(),
            "pane {pane} still runs after every process on {tty} was killed"
        );
        let work = setup.work.display().to_string();
        let command = CodexTui::command(codex, setup, args);
        tmux.tmux(&["respawn-pane", "-t", pane, "-c", &work, &command]);
    }

    /// The pane's command: `codex` given `args`, in the setup's environment and the pane's
    /// `TMUX_PANE`, then a sleep that keeps the pane.
    fn command(codex: &Path, setup: &Setup, args: &[&str]) -> String {
        let mut words: Vec<String> = (setup.env.iter())
            .map(|(k, v)| format!("{k}='{v}'"))
            .collect();
        words.push("TERM=xterm-256color".into());
        words.push("TMUX_PANE=\"$TMUX_PANE\"".into());
        let args: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
        format!(
            "env -i {} '{}' {}; exec sleep 600",
            words.join(" "),
            codex.display(),
            args.join(" ")
        )
    }

    pub fn screen(&self, tmux: &TmuxServer) -> String {
        tmux.tmux(&["capture-pane", "-p", "-t", &self.pane])
    }

    /// Waits for its composer and submits a first prompt, at which Codex starts its session
    /// and runs its SessionStart hook; the session's id once `server` lists it as Codex's,
    /// reachable through its control socket.
    pub async fn first_prompt(
        &self,
        tmux: &TmuxServer,
        server: &TestServer,
        context: &impl Fn() -> String,
    ) -> String {
        let step = super::day::STEP;
        super::eventually("its composer", step, || {
            self.screen(tmux).contains("Ask Codex to do anything")
        })
        .await;
        self.submit(tmux, "say hello");
        super::eventually_ok("the session known through its hooks", step, async || {
            let sessions = server.get_json("/sessions").await;
            let codex = sessions["sessions"].as_array().and_then(|all| {
                all.iter()
                    .find(|s| s["agent"] == "codex" && s["inbox"]["live"] == true)
                    .and_then(|s| s["session_id"].as_str().map(str::to_owned))
            });
            codex.ok_or_else(|| format!("{sessions}\n{}", context()))
        })
        .await
    }

    /// Types `text` at the composer and submits it: two `send-keys`, as Codex needs.
    pub fn submit(&self, tmux: &TmuxServer, text: &str) {
        tmux.tmux(&["send-keys", "-t", &self.pane, "-l", text]);
        std::thread::sleep(Duration::from_millis(300));
        tmux.tmux(&["send-keys", "-t", &self.pane, "Enter"]);
    }
}
