//! The real Claude Code in a pane of a private tmux server, wired to the test daemon the way a
//! user wires it: `wakebridge hook --print-settings`'s hooks (each payload also logged on its
//! way in), the daemon's private HOME, state and wake dir, a pre-approved start
//! ([`super::claude_home`]), and the caller's auth and API settings.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::harness::TestServer;
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
        let root = server.root.path();
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
