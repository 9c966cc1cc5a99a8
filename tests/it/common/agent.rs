//! The scripted agent TUI (`fake_agent.py`, next to this file) in a pane of a private tmux
//! server: start it in a mode, change its mode, read what it was sent and what it submitted.

use std::path::PathBuf;

use super::tmux::TmuxServer;

/// One fake agent: its pane, the file of every byte it received, and its control file.
pub struct Agent {
    pub pane: String,
    pub record: PathBuf,
    pub control: PathBuf,
}

/// `value` as one single-quoted shell word.
fn quoted(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

impl Agent {
    /// A fake agent in its own window of `server`, starting in `mode`.
    pub fn spawn(server: &TmuxServer, name: &str, mode: &str) -> Agent {
        Self::spawn_with(server, name, mode, &[], None)
    }

    /// [`Agent::spawn`] with `env` set for the agent and the hooks it fires
    /// (`FAKE_AGENT_HOOK`, `FAKE_AGENT_SESSION`, ...) and `typed` already on its prompt line.
    pub fn spawn_with(
        server: &TmuxServer,
        name: &str,
        mode: &str,
        env: &[(&str, &str)],
        typed: Option<&str>,
    ) -> Agent {
        let record = server.dir().join(format!("{name}.rec"));
        let control = server.dir().join(format!("{name}.ctl"));
        std::fs::write(&control, mode).expect("control file");
        let mut command = String::from("env");
        for (key, value) in env {
            command += &format!(" {key}={}", quoted(value));
        }
        command += &format!(
            " python3 {} {} {}",
            quoted(super::FAKE_AGENT),
            quoted(&record.display().to_string()),
            quoted(&control.display().to_string())
        );
        if let Some(typed) = typed {
            command += &format!(" {}", quoted(typed));
        }
        let pane = server.new_pane(&command);
        // Ready once it has drawn its prompt line: keys sent before that would reach it while
        // it starts up, not as a TUI would take them.
        let started = std::time::Instant::now();
        while !server
            .tmux(&["capture-pane", "-p", "-t", &pane])
            .contains('\u{276f}')
        {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(10),
                "the fake agent in {pane} never drew its prompt"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Agent {
            pane,
            record,
            control,
        }
    }

    /// (unix seconds, text) of every line the agent submitted; a Stop hook's answer it went on
    /// with is recorded as `[stop hook] <reason>`.
    pub fn submits(&self) -> Vec<(f64, String)> {
        let path = PathBuf::from(format!("{}.submits", self.record.display()));
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| {
                let (at, text) = line.split_once('\t')?;
                Some((at.parse().ok()?, text.to_owned()))
            })
            .collect()
    }

    /// The texts of [`Agent::submits`].
    pub fn submitted(&self) -> Vec<String> {
        self.submits().into_iter().map(|(_, text)| text).collect()
    }

    /// Switches the agent's mode (`idle`, `busy`, `dialog`, `work`, `deaf`, `deaf1`).
    pub fn set(&self, mode: &str) {
        std::fs::write(&self.control, mode).expect("control file");
    }
}
