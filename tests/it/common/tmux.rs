//! A private tmux server for one test: its own socket in a temp dir (never the user's server),
//! killed when the guard drops. Includes helpers to open panes running given commands and to
//! wait for what tmux reports about them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use wakebridge::mux::MuxConfig;

/// How long a helper waits for tmux to report an expected pane state before failing the test.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(5);
const POLL_EVERY: Duration = Duration::from_millis(20);

pub struct TmuxServer {
    dir: tempfile::TempDir,
    socket: PathBuf,
}

impl TmuxServer {
    /// Start a server with one placeholder session so it stays up while panes come and go.
    pub fn start() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("wb-tmux-")
            .tempdir()
            .expect("temp dir");
        let socket = dir.path().join("sock");
        let server = Self { dir, socket };
        server.tmux(&[
            "new-session",
            "-d",
            "-s",
            "base",
            "-x",
            "120",
            "-y",
            "30",
            "sleep 600",
        ]);
        server
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A mux configuration aimed at this server.
    pub fn config(&self) -> MuxConfig {
        MuxConfig {
            tmux_socket: Some(self.socket.clone()),
            ..MuxConfig::default()
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("run tmux")
    }

    /// Run a tmux command that must succeed; returns stdout, trimmed.
    pub fn tmux(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "tmux {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Open a window running `command` (through the default shell) and return its pane id.
    pub fn new_pane(&self, command: &str) -> String {
        self.tmux(&["new-window", "-d", "-P", "-F", "#{pane_id}", command])
    }

    /// Like [`Self::new_pane`], starting in `dir`.
    pub fn new_pane_in(&self, dir: &Path, command: &str) -> String {
        let dir = dir.to_string_lossy();
        self.tmux(&[
            "new-window",
            "-d",
            "-P",
            "-F",
            "#{pane_id}",
            "-c",
            &dir,
            command,
        ])
    }

    /// One format value of one pane.
    pub fn pane_format(&self, pane: &str, format: &str) -> String {
        self.tmux(&["display-message", "-p", "-t", pane, format])
    }

    /// Wait until `format` of `pane` reads `want`.
    pub fn wait_for(&self, pane: &str, format: &str, want: &str) {
        let start = Instant::now();
        loop {
            let got = self.pane_format(pane, format);
            if got == want {
                return;
            }
            assert!(
                start.elapsed() < SETTLE_TIMEOUT,
                "pane {pane}: {format} stayed {got:?}, wanted {want:?}"
            );
            std::thread::sleep(POLL_EVERY);
        }
    }
}

impl Drop for TmuxServer {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// Wait until `file` holds at least `len` bytes (or the settle timeout passes), then a little
/// longer so that anything arriving late is caught too; returns the content.
pub fn read_when_settled(file: &Path, len: usize) -> Vec<u8> {
    let start = Instant::now();
    while start.elapsed() < SETTLE_TIMEOUT {
        if std::fs::read(file).map(|b| b.len() >= len).unwrap_or(false) {
            break;
        }
        std::thread::sleep(POLL_EVERY);
    }
    std::thread::sleep(Duration::from_millis(300));
    std::fs::read(file).unwrap_or_default()
}
