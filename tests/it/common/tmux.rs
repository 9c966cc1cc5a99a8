//! A private tmux server for one test: its own socket in a temp dir and no config file (every
//! call is `tmux -S <socket> -f /dev/null`, so never the user's server nor their tmux.conf),
//! with a keeper session so the server stays up while panes come and go. Killed when the guard
//! drops, pass or fail: SIGCONT first (a test may have stopped it), `kill-server`, then SIGKILL
//! if the server process is still there; its temp dir goes once the panes' programs are gone
//! too. Includes helpers to open windows running given commands, wait for what tmux reports
//! about them, count panes, signal the server process, and wrap the tmux binary so a test can
//! count the subcommands the code under test runs.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use wakebridge::mux::MuxConfig;

use super::timeout::{OnTimeout, on_timeout};

/// How long a helper waits for tmux to report an expected pane state before failing the test.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(5);
const POLL_EVERY: Duration = Duration::from_millis(20);

/// The session that keeps the server up: one window running `sleep 600`.
pub const KEEPER: &str = "keeper";

pub struct TmuxServer {
    dir: tempfile::TempDir,
    socket: PathBuf,
    /// The server process (0 until it is known).
    pid: i32,
    /// Stops the server if the test times out (this guard then never drops).
    _on_timeout: Option<OnTimeout>,
}

impl TmuxServer {
    /// Start a server with the keeper session (120x30, so are the windows opened in it).
    pub fn start() -> Self {
        super::timeout::arm_test_timeout();
        let dir = tempfile::Builder::new()
            .prefix("wb-tmux-")
            .tempdir()
            .expect("temp dir");
        let socket = dir.path().join("sock");
        let mut server = Self {
            dir,
            socket,
            pid: 0,
            _on_timeout: None,
        };
        server.tmux(&[
            "new-session",
            "-d",
            "-s",
            KEEPER,
            "-x",
            "120",
            "-y",
            "30",
            "sleep 600",
        ]);
        let pid = server.tmux(&["display-message", "-p", "#{pid}"]);
        server.pid = pid
            .parse()
            .unwrap_or_else(|e| panic!("tmux server pid {pid:?}: {e}"));
        let (socket, pid) = (server.socket.clone(), server.pid);
        server._on_timeout = Some(on_timeout(move || stop_server(&socket, pid)));
        server
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The server's temp dir (holds the socket; tests put their files here too).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The tmux server process.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// A mux configuration aimed at this server.
    pub fn config(&self) -> MuxConfig {
        MuxConfig {
            tmux_socket: Some(self.socket.clone()),
            ..MuxConfig::default()
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        tmux_command(&self.socket)
            .args(args)
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

    /// Open a window in the keeper session running `command` (through the default shell) and
    /// return its pane id.
    pub fn new_pane(&self, command: &str) -> String {
        self.new_window(&[], command)
    }

    /// Like [`Self::new_pane`], starting in `dir`.
    pub fn new_pane_in(&self, dir: &Path, command: &str) -> String {
        self.new_window(&["-c", &dir.to_string_lossy()], command)
    }

    fn new_window(&self, options: &[&str], command: &str) -> String {
        let target = format!("{KEEPER}:");
        let mut args = vec!["new-window", "-d", "-t", &target, "-P", "-F", "#{pane_id}"];
        args.extend_from_slice(options);
        args.push(command);
        self.tmux(&args)
    }

    /// The keeper session's pane (it runs `sleep 600`).
    pub fn keeper_pane(&self) -> String {
        self.tmux(&["list-panes", "-t", KEEPER, "-F", "#{pane_id}"])
    }

    /// The id of every pane on the server, in every session.
    pub fn pane_ids(&self) -> Vec<String> {
        self.tmux(&["list-panes", "-a", "-F", "#{pane_id}"])
            .lines()
            .map(str::to_owned)
            .collect()
    }

    pub fn pane_exists(&self, pane: &str) -> bool {
        self.pane_ids().iter().any(|id| id == pane)
    }

    /// Panes on the server, the keeper's included.
    pub fn pane_count(&self) -> usize {
        self.pane_ids().len()
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

    /// Wait until `pane` shows the prompt of a `bash --norc` (`bash-5.2$`, `bash-5.2#` for
    /// root) on its last line: the shell runs and reads its terminal. Waiting for
    /// `#{pane_current_command}` to read `bash` is not that: until the pane's first process
    /// takes its terminal, tmux answers from the pane's start command (`bash` for `exec bash
    /// -i`), and after that, until the process runs the command, it names tmux's own fork.
    pub fn wait_for_bash_prompt(&self, pane: &str) {
        let start = Instant::now();
        loop {
            let screen = self.tmux(&["capture-pane", "-p", "-t", pane]);
            let last = screen.lines().rev().find(|l| !l.trim().is_empty());
            if last.is_some_and(|l| {
                let l = l.trim_end();
                l.starts_with("bash-") && (l.ends_with('$') || l.ends_with('#'))
            }) {
                return;
            }
            assert!(
                start.elapsed() < SETTLE_TIMEOUT,
                "pane {pane} never showed a bash prompt: {screen:?}"
            );
            std::thread::sleep(POLL_EVERY);
        }
    }

    /// Send `signal` to the server process (SIGSTOP to freeze it; the drop SIGCONTs it).
    pub fn signal(&self, signal: i32) {
        send_signal(self.pid, signal);
    }

    /// Writes a tmux wrapper into the server's dir that logs each subcommand (argv[3], after
    /// `-S sock`) to `log`, then runs the real tmux; give it to the code under test as
    /// `tmux_bin` and read the counts with [`count_lines`].
    pub fn counting_tmux(&self, log: &Path) -> PathBuf {
        let real = Command::new("sh")
            .args(["-c", "command -v tmux"])
            .output()
            .unwrap();
        let real = String::from_utf8(real.stdout).unwrap().trim().to_owned();
        let script = self.dir().join("tmux-counting");
        std::fs::write(
            &script,
            format!(
                // The subcommand is the first word that is neither an option nor the value
                // of -S/-L/-f (wakebridge runs `tmux -u -S <socket> <subcommand> ...`).
                "#!/bin/sh\nsub=; value=\nfor a in \"$@\"; do\n  if [ -n \"$value\" ]; then value=; continue; fi\n  case \"$a\" in -S|-L|-f) value=1 ;; -*) ;; *) sub=$a; break ;; esac\ndone\necho \"$sub\" >> '{}'\nexec '{}' \"$@\"\n",
                log.display(),
                real
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        script
    }
}

impl Drop for TmuxServer {
    fn drop(&mut self) {
        // The panes' programs outlive the server by a moment (Claude Code writes its telemetry
        // as it exits on the hangup): the temp dir goes only once they are gone, or they write
        // a `home/` back into a removed dir and /tmp keeps it.
        send_signal(self.pid, libc::SIGCONT);
        let panes = self.run(&["list-panes", "-a", "-F", "#{pane_pid}"]);
        stop_server(&self.socket, self.pid);
        let sessions: Vec<String> = (String::from_utf8_lossy(&panes.stdout).lines())
            .map(str::to_owned)
            .collect();
        let start = Instant::now();
        loop {
            let left = processes_in_sessions(&sessions);
            if left.is_empty() {
                return;
            }
            if start.elapsed() > EXIT_PATIENCE {
                for pid in left {
                    send_signal(pid, libc::SIGKILL);
                }
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// The processes whose session (`/proc/<pid>/stat` field 6) is one of `sessions`: what a pane
/// started, as each pane's first process leads its own session.
fn processes_in_sessions(sessions: &[String]) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let session_of = |stat: &str| {
        // After the command's closing parenthesis: state, ppid, pgrp, session.
        let after = stat.rsplit_once(')')?.1;
        after.split_whitespace().nth(3).map(str::to_owned)
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // A zombie has exited, unless its threads live on (a main thread that ended first).
            let zombie = stat
                .rsplit_once(')')
                .is_some_and(|(_, a)| a.trim_start().starts_with('Z'))
                && std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, Iterator::count) <= 1;
            !zombie && session_of(&stat).is_some_and(|sid| sessions.contains(&sid))
        })
        .collect()
}

/// `tmux -S <socket> -f /dev/null`, outside any tmux session.
fn tmux_command(socket: &Path) -> Command {
    let mut command = Command::new("tmux");
    command
        .arg("-S")
        .arg(socket)
        .args(["-f", "/dev/null"])
        .env_remove("TMUX");
    command
}

fn send_signal(pid: i32, signal: i32) {
    if pid > 0 {
        // SAFETY: kill(2) on the tmux server a TmuxServer started, or a process its panes ran.
        unsafe { libc::kill(pid, signal) };
    }
}

/// How long a server may take to exit after `kill-server` before it gets SIGKILL.
const EXIT_PATIENCE: Duration = Duration::from_secs(2);

/// SIGCONT (it may be stopped), `kill-server`, then SIGKILL if the server process is still
/// there after [`EXIT_PATIENCE`].
fn stop_server(socket: &Path, pid: i32) {
    send_signal(pid, libc::SIGCONT);
    let _ = tmux_command(socket).arg("kill-server").output();
    let start = Instant::now();
    while server_alive(socket, pid) {
        if start.elapsed() > EXIT_PATIENCE {
            send_signal(pid, libc::SIGKILL);
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether the tmux server `pid` still runs: checked against the socket in its command line
/// (empty once it is a zombie), so a reused pid is never taken for it.
fn server_alive(socket: &Path, pid: i32) -> bool {
    let socket = socket.to_string_lossy();
    pid > 0
        && std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains(socket.as_ref()))
}

/// How many times each line occurs in a [`TmuxServer::counting_tmux`] log: calls per
/// subcommand.
pub fn count_lines(log: &Path) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for line in std::fs::read_to_string(log).unwrap_or_default().lines() {
        *counts.entry(line.to_owned()).or_insert(0) += 1;
    }
    counts
}

/// A pane whose program puts the terminal in raw mode and records every byte it receives (so
/// Enter arrives as `\r`); returns the pane and the recording.
pub fn recorder_pane(server: &TmuxServer, name: &str) -> (String, PathBuf) {
    let file = server.dir().join(name);
    let pane = server.new_pane(&format!("stty raw -echo; exec cat > '{}'", file.display()));
    server.wait_for(&pane, "#{pane_current_command}", "cat");
    (pane, file)
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
