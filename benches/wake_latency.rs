//! Wake latency benchmark (prints figures; not a timed test): from the moment a `POST /hook`
//! is sent to the moment the wake prompt's bytes arrive in a real tmux pane, the moment the TUI
//! there takes the Enter (submitted), and the moment the bus gets its answer, through the real
//! release binary.
//!
//!     cargo bench --bench wake_latency                 # 50 wakes, default submit delay (500 ms)
//!     WB_BENCH_ROUNDS=200 cargo bench --bench wake_latency
//!     WB_BENCH_TUI=recorder cargo bench --bench wake_latency   # a pane with no prompt line
//!     WB_BENCH_TUI=claude cargo bench --bench wake_latency     # the real Claude Code, offline
//!
//! A private tmux server (`-S` in a temp dir) runs the scripted agent TUI of the tests
//! (`tests/it/common/fake_agent.py`: an input box with a `❯` prompt line, like Claude Code's), or
//! with `WB_BENCH_TUI=recorder` a raw `cat`, whose screen shows no prompt line, so the injector
//! waits the whole submit delay and cannot confirm, or with `WB_BENCH_TUI=claude` the real
//! Claude Code (on PATH), offline, whose own hooks stamp each submit; the daemon maps one
//! session to it with cooldown 0, so every event wakes.

// A benchmark stops on the first failure: unwrapping is how it says so.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use std::io::{Read, Write};

fn tmux(socket: &Path, args: &[&str]) -> String {
    let out = Command::new("tmux")
        .arg("-S")
        .arg(socket)
        .args(args)
        .output()
        .expect("tmux");
    assert!(
        out.status.success(),
        "tmux {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn post(port: u16, body: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let request = format!(
        "POST /hook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("write");
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, response)
}

fn wait_len(file: &Path, len: u64, limit: Duration) -> Option<Instant> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if std::fs::metadata(file)
            .map(|m| m.len() >= len)
            .unwrap_or(false)
        {
            return Some(Instant::now());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    None
}

/// Unix seconds (the agent stamps its submits with Python's `time.time()`).
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The submit stamps the agent wrote, once there are `count`.
fn wait_submits(file: &Path, count: usize, limit: Duration) -> Option<Vec<f64>> {
    let start = Instant::now();
    while start.elapsed() < limit {
        let stamps: Vec<f64> = std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split('\t').next()?.parse().ok())
            .collect();
        if stamps.len() >= count {
            return Some(stamps);
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    None
}

/// The real Claude Code (`claude` on PATH), offline, in a throw-away HOME: a pre-approved dummy
/// key, the folder trusted, no API retries (each turn fails at once), and hooks that stamp each
/// submit (`UserPromptSubmit`) and each turn's end (`Stop`, `StopFailure`).
fn claude_command(root: &Path, submits: &Path, ends: &Path) -> String {
    let claude = std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("claude"))
                .find(|c| c.is_file())
        })
        .expect("WB_BENCH_TUI=claude needs `claude` on PATH");
    let home = root.join("home");
    let work = root.join("work");
    std::fs::create_dir_all(home.join(".claude")).expect("home");
    std::fs::create_dir_all(&work).expect("work");
    let key = "sk-ant-api03-wakebridge-bench-key-0123456789abcdefghij";
    let work_key = std::fs::canonicalize(&work)
        .expect("work")
        .display()
        .to_string();
    let state = serde_json::json!({
        "customApiKeyResponses": {"approved": [&key[key.len() - 20..]], "rejected": []},
        "hasCompletedOnboarding": true,
        "projects": {work_key: {"hasTrustDialogAccepted": true}},
    });
    std::fs::write(home.join(".claude.json"), state.to_string()).expect("state");
    let stamp = |file: &Path| {
        serde_json::json!([{"hooks": [{"type": "command",
            "command": format!("date +%s.%N >> '{}'", file.display())}]}])
    };
    let settings = serde_json::json!({"hooks": {
        "UserPromptSubmit": stamp(submits), "Stop": stamp(ends), "StopFailure": stamp(ends),
    }});
    std::fs::write(home.join(".claude/settings.json"), settings.to_string()).expect("settings");
    format!(
        "cd '{}' && exec env -i HOME='{}' TERM=xterm-256color PATH=/usr/bin:/bin \
         ANTHROPIC_API_KEY={key} CLAUDE_CODE_MAX_RETRIES=0 '{}'",
        work.display(),
        home.display(),
        claude.display()
    )
}

fn main() {
    let rounds: usize = std::env::var("WB_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let tui = std::env::var("WB_BENCH_TUI").unwrap_or_else(|_| "scripted".into());
    let (recorder, claude) = (tui == "recorder", tui == "claude");
    let submit_delay = std::env::var("WB_BENCH_SUBMIT_DELAY").unwrap_or_else(|_| "500ms".into());
    let root = tempfile::tempdir().expect("tempdir");
    let socket = root.path().join("tmux.sock");
    let record = root.path().join("record");
    // The scripted TUI stamps its submits here; Claude Code's hooks do the same (and its turn
    // ends are stamped in `record.ends`).
    let submits = root.path().join("record.submits");
    let ends = root.path().join("record.ends");
    tmux(
        &socket,
        &[
            "new-session",
            "-d",
            "-s",
            "bench",
            "-x",
            "120",
            "-y",
            "30",
            "sleep 600",
        ],
    );
    let control = root.path().join("control");
    std::fs::write(&control, "idle").expect("control");
    let command = if recorder {
        format!("stty raw -echo; exec cat > '{}'", record.display())
    } else if claude {
        claude_command(root.path(), &submits, &ends)
    } else {
        format!(
            "exec python3 '{}/tests/it/common/fake_agent.py' '{}' '{}'",
            env!("CARGO_MANIFEST_DIR"),
            record.display(),
            control.display()
        )
    };
    let pane = tmux(
        &socket,
        &["new-window", "-d", "-P", "-F", "#{pane_id}", &command],
    );
    let ready = Instant::now();
    let started = |screen: &str| match tui.as_str() {
        "recorder" => true,
        "claude" => screen.contains("for shortcuts"),
        _ => screen.contains('\u{276f}'),
    };
    while !started(&tmux(&socket, &["capture-pane", "-p", "-t", &pane]))
        || (recorder
            && tmux(
                &socket,
                &[
                    "display-message",
                    "-p",
                    "-t",
                    &pane,
                    "#{pane_current_command}",
                ],
            ) != "cat")
    {
        assert!(
            ready.elapsed() < Duration::from_secs(90),
            "the pane's program did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    if claude {
        // Past its start-up (remote settings time out offline, then the prompt settles).
        std::thread::sleep(Duration::from_secs(3));
    }
    let wake = root.path().join("wake");
    std::fs::create_dir_all(&wake).expect("wake dir");
    std::fs::write(
        wake.join("panes.json"),
        format!("{{\"bench\": {{\"mux\": \"tmux\", \"pane\": \"{pane}\"}}}}\n"),
    )
    .expect("panes.json");
    std::fs::create_dir_all(root.path().join("run")).expect("run");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_wakebridge"))
        .args([
            "serve",
            "--port",
            &port.to_string(),
            "--backend",
            "mux",
            "--cooldown",
            "0",
        ])
        .env("AGENT_EVENT_BUS_WAKE_DIR", &wake)
        .env("XDG_RUNTIME_DIR", root.path().join("run"))
        .env("XDG_STATE_HOME", root.path().join("state"))
        .env("XDG_CONFIG_HOME", root.path().join("config"))
        .env("WAKEBRIDGE_REGISTRATION__ENABLED", "false")
        .env("WAKEBRIDGE_NUDGER__ENABLED", "false")
        .env("WAKEBRIDGE_MUX__TMUX_SOCKET", &socket)
        .env("WAKEBRIDGE_MUX__SUBMIT_DELAY", &submit_delay)
        .env("RUST_LOG", "warn")
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the release binary");
    let up = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            up.elapsed() < Duration::from_secs(10),
            "daemon did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let prompt_len =
        "Check the event bus - a directed event arrived for this session.".len() as u64;
    let (mut to_text, mut to_enter, mut to_answer) = (Vec::new(), Vec::new(), Vec::new());
    let mut to_submitted = Vec::new();
    let mut expected = 0u64;
    for i in 0..rounds {
        let body = format!(
            r#"{{"event_id": {i}, "signal_level": "actionable", "channel": "session:bench", "timestamp": "t{i}"}}"#
        );
        // Post from a thread and watch the recorder here: the text lands before the answer.
        let sent = Instant::now();
        let sent_unix = unix_now();
        let poster = std::thread::spawn(move || {
            let answer = post(port, &body);
            (answer, Instant::now())
        });
        if !claude {
            let text_at = wait_len(&record, expected + prompt_len, Duration::from_secs(5));
            let enter_at = wait_len(&record, expected + prompt_len + 1, Duration::from_secs(5));
            to_text.push(text_at.expect("prompt arrived").duration_since(sent));
            to_enter.push(enter_at.expect("enter arrived").duration_since(sent));
        }
        let submitted = (!recorder)
            .then(|| wait_submits(&submits, i + 1, Duration::from_secs(5)).expect("submitted"));
        let ((status, response), answered) = poster.join().expect("poster");
        assert_eq!(status, 200, "{response}");
        assert!(response.contains("\"action\":\"tmux\""), "{response}");
        // Whatever arrived (a second Enter, when the first was not taken) counts as this round's.
        expected = std::fs::metadata(&record).map_or(expected + prompt_len + 1, |m| m.len());
        to_answer.push(answered.duration_since(sent));
        if let Some(stamps) = submitted {
            to_submitted.push(Duration::from_secs_f64((stamps[i] - sent_unix).max(0.0)));
        }
        if claude {
            // Offline, each wake's turn fails at once; the next wake goes to the idle prompt.
            wait_submits(&ends, i + 1, Duration::from_secs(60)).expect("the turn ended");
            std::thread::sleep(Duration::from_millis(500));
        } else {
            // The next event after the TUI has redrawn its empty prompt.
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let percentiles = |v: &mut Vec<Duration>| {
        if v.is_empty() {
            return "-".to_string();
        }
        v.sort();
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize].as_secs_f64() * 1000.0;
        format!("p50 {:.1} ms, p99 {:.1} ms", at(0.5), at(0.99))
    };
    println!(
        "wake_latency rounds={rounds} submit_delay={submit_delay} pane={tui}: request->text {}; request->first Enter {}; request->submitted {}; request->200 {}",
        percentiles(&mut to_text),
        percentiles(&mut to_enter),
        percentiles(&mut to_submitted),
        percentiles(&mut to_answer),
    );
    let _ = daemon.kill();
    let _ = daemon.wait();
    let _ = Command::new("tmux")
        .arg("-S")
        .arg(&socket)
        .arg("kill-server")
        .status();
}
