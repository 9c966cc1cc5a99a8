//! The real Claude Code wired to the test daemon the way a user wires it: `wakebridge hook
//! --print-settings`'s hooks (each payload also logged on its way in) or `wakebridge claude
//! install`, the daemon's private HOME, state and wake dir, a pre-approved start
//! ([`super::claude_home`]), and the caller's auth and API settings. [`RealClaude`] runs in a
//! pane of a private tmux server; [`BareClaude`] on a bare pseudo-terminal ([`super::pty`]),
//! where no multiplexer names a pane and only its inbox reaches it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::harness::TestServer;
use super::pty::Pty;
use super::tmux::TmuxServer;

/// A started Claude Code: its pane, the session id its SessionStart hook mapped, the hook log.
pub struct RealClaude {
    pub pane: String,
    pub sid: String,
    pub hook_log: PathBuf,
}

impl RealClaude {
    /// Starts `claude` in a new pane with `env` (`KEY=value` words, e.g. the API key) and waits
    /// until its SessionStart hook has mapped the pane and its prompt is drawn.
    pub async fn start(
        claude: &Path,
        tmux: &TmuxServer,
        server: &TestServer,
        env: &[String],
    ) -> RealClaude {
        Self::start_with(claude, tmux, server, env, &serde_json::json!({})).await
    }

    /// [`RealClaude::start`] with `global`'s keys in `.claude.json` and the Bash tool allowed
    /// (a scripted model's tool calls then run without a permission dialog).
    pub async fn start_with(
        claude: &Path,
        tmux: &TmuxServer,
        server: &TestServer,
        env: &[String],
        global: &serde_json::Value,
    ) -> RealClaude {
        let root = server.root.path();
        let hook = format!(
            "tee -a '{}' | '{}' hook",
            root.join("hooks.log").display(),
            env!("CARGO_BIN_EXE_wakebridge")
        );
        let mut settings = wakebridge::cli::hook::settings_json(&hook);
        settings["permissions"] = serde_json::json!({"allow": ["Bash"]});
        super::claude_home_with(&root.join("home"), &root.join("work"), &settings, global);
        Self::launch(claude, tmux, server, env).await
    }

    /// The session as a user sets it up: Claude Code's home pre-approved (Bash allowed, so the
    /// scripted tool calls run without a dialog), then `wakebridge claude install` wires the
    /// hooks and the status line into its settings, then `claude` in a pane. Claude Code's own
    /// auto-continue is armed but would fire ten minutes after a reset: wakebridge resumes.
    pub async fn installed(
        claude: &Path,
        tmux: &TmuxServer,
        server: &TestServer,
        env: &[String],
    ) -> RealClaude {
        install_home(server.root.path());
        Self::launch(claude, tmux, server, env).await
    }

    /// Starts `claude` in a new pane of `tmux` in the test's `work` directory, on the Claude
    /// Code home already written under the daemon's private HOME, and waits as
    /// [`RealClaude::start`] does.
    pub async fn launch(
        claude: &Path,
        tmux: &TmuxServer,
        server: &TestServer,
        env: &[String],
    ) -> RealClaude {
        Self::launch_with_args(claude, tmux, server, env, "").await
    }

    /// [`RealClaude::launch`] with `args` (shell words) after `claude`.
    pub async fn launch_with_args(
        claude: &Path,
        tmux: &TmuxServer,
        server: &TestServer,
        env: &[String],
        args: &str,
    ) -> RealClaude {
        let root = server.root.path();
        let (work, hook_log) = (root.join("work"), root.join("hooks.log"));
        let mut words: Vec<String> = super::env::test_env(root, &[])
            .into_iter()
            .map(|(k, v)| format!("{k}='{v}'"))
            .collect();
        words.extend([
            "TERM=xterm-256color".into(),
            "PATH=/usr/bin:/bin".into(),
            "TMUX=\"$TMUX\"".into(),
            "TMUX_PANE=\"$TMUX_PANE\"".into(),
        ]);
        words.extend(env.iter().cloned());
        let pane = tmux.new_pane_in(
            &work,
            &format!(
                "env -i {} '{}' {args}; exec sleep 600",
                words.join(" "),
                claude.display()
            ),
        );
        let panes = server.wake_dir.join("panes.json");
        let mapped = || {
            let text = std::fs::read_to_string(&panes).ok()?;
            let panes: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(&text).ok()?;
            panes
                .into_iter()
                .find(|(_, v)| v["pane"] == pane.as_str())
                .map(|(sid, _)| sid)
        };
        let mut sid = None;
        super::eventually(
            "mapped by its SessionStart hook",
            Duration::from_secs(90),
            || {
                sid = mapped();
                sid.is_some()
            },
        )
        .await;
        let started = RealClaude {
            pane,
            sid: sid.unwrap_or_default(),
            hook_log,
        };
        super::eventually("its prompt", Duration::from_secs(60), || {
            started.screen(tmux).contains('\u{276f}')
        })
        .await;
        started
    }

    /// Every hook payload so far.
    pub fn hooks(&self) -> String {
        std::fs::read_to_string(&self.hook_log).unwrap_or_default()
    }

    pub fn screen(&self, tmux: &TmuxServer) -> String {
        tmux.tmux(&["capture-pane", "-p", "-t", &self.pane])
    }

    /// Types `text` the way a person does, then Enter.
    pub async fn submit(&self, tmux: &TmuxServer, text: &str) {
        tmux.tmux(&["send-keys", "-t", &self.pane, "-l", text]);
        tokio::time::sleep(Duration::from_millis(500)).await;
        tmux.tmux(&["send-keys", "-t", &self.pane, "Enter"]);
    }
}

/// Claude Code's home as a user sets it up under the daemon's private HOME in `root`:
/// pre-approved, `work` trusted, Bash allowed (so the scripted tool calls run without a
/// dialog), then `wakebridge claude install` wires the hooks and the status line into its
/// settings. Claude Code's own auto-continue after a usage limit stays armed but would fire
/// ten minutes after the reset (its cached `tengu_marble_heron` jitter), so a resume a test
/// sees is wakebridge's.
pub fn install_home(root: &Path) {
    super::claude_home_with(
        &root.join("home"),
        &root.join("work"),
        &serde_json::json!({"permissions": {"allow": ["Bash"]}}),
        &serde_json::json!({"cachedGrowthBookFeatures": {"tengu_marble_heron": {
            "jitterMinMs": 600_000, "jitterMaxMs": 600_000}}}),
    );
    let installed = super::harness::binary(root, &[])
        .args(["claude", "install"])
        .output()
        .expect("run wakebridge claude install");
    assert!(
        installed.status.success(),
        "{}",
        String::from_utf8_lossy(&installed.stderr)
    );
}

/// A real Claude Code on a bare pseudo-terminal: no tmux, no zellij, no `TMUX*` or `ZELLIJ*`
/// variable, so its hooks map no pane and nothing can be typed into it but by the test (a
/// person at the terminal); wakebridge reaches it through its inbox alone.
pub struct BareClaude {
    pub pty: Pty,
    /// The session id the daemon knows it by (from its SessionStart hook).
    pub sid: String,
    /// The directory it runs in (canonical, as its hooks report it).
    pub work: PathBuf,
}

impl BareClaude {
    /// Sets up its home as [`install_home`] does, starts `claude` on a bare pty in the test's
    /// `work` directory with the daemon's private environment and `env` (`KEY=value` words, e.g.
    /// [`super::model::Model::claude_env`]), and waits until the daemon knows the session
    /// (its SessionStart hook reported its directory and its inbox) and its prompt is drawn.
    pub async fn installed(claude: &Path, server: &TestServer, env: &[String]) -> BareClaude {
        let root = server.root.path();
        install_home(root);
        let work = std::fs::canonicalize(root.join("work")).expect("work dir");
        let mut vars = super::env::test_env(root, &[]);
        vars.insert("TERM".into(), "xterm-256color".into());
        vars.insert("PATH".into(), "/usr/bin:/bin".into());
        for word in env {
            let (key, value) = word
                .split_once('=')
                .unwrap_or_else(|| panic!("not KEY=value: {word}"));
            vars.insert(key.into(), value.into());
        }
        let multiplexed = |k: &String| k.starts_with("TMUX") || k.starts_with("ZELLIJ");
        assert!(!vars.keys().any(multiplexed), "{vars:?}");
        let pty = Pty::spawn(claude, &[], &work, vars);
        // Its SessionStart hook tells the daemon its id, directory and inbox; the pty's is the
        // only session in this daemon's private world.
        let cwd = work.display().to_string();
        let sid = super::eventually_ok(
            "the session known through its SessionStart hook",
            Duration::from_secs(90),
            async || {
                let sessions = server.get_json("/sessions").await;
                let found = sessions["sessions"].as_array().and_then(|all| {
                    all.iter()
                        .find(|s| s["cwd"] == cwd.as_str() && s["inbox"]["live"] == true)
                        .and_then(|s| s["session_id"].as_str().map(str::to_owned))
                });
                assert!(pty.running(), "claude exited:\n{}", pty.tail(3000));
                found.ok_or_else(|| format!("{sessions}\n{}", pty.tail(2000)))
            },
        )
        .await;
        let started = BareClaude { pty, sid, work };
        super::eventually("its prompt", Duration::from_secs(60), || {
            started.pty.raw().contains('\u{276f}')
        })
        .await;
        started
    }

    /// The session's entry in Claude Code's own registry (`~/.claude/sessions/<pid>.json`).
    pub fn registry(&self, server: &TestServer) -> serde_json::Value {
        let file = (server.root.path().join("home/.claude/sessions"))
            .join(format!("{}.json", self.pty.pid()));
        std::fs::read_to_string(file)
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or(serde_json::Value::Null)
    }

    /// The end of what it drew, escapes taken out, for failure messages.
    pub fn screen(&self) -> String {
        self.pty.tail(3000)
    }

    /// Types `text` the way a person at the terminal does, then Enter.
    pub async fn submit(&self, text: &str) {
        self.pty.submit(text).await;
    }
}
