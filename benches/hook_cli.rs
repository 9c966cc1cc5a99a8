//! `wakebridge hook` as Claude Code runs it on every tool call (not a timed test: it prints
//! figures). Spawns the real release binary once per call with a PreToolUse payload on stdin,
//! in a private HOME with a ledger that already knows the session, and reports the wall time of
//! each whole invocation (fork, exec, reading the payload, the configuration, the busy marker,
//! the ledger row, exit), p50/p90/p99; and, interleaved with it, `wakebridge --version` (the
//! cost of starting this binary at all) and `/bin/true` (of starting any process), which this
//! machine's speed at the moment decides.
//!
//!     cargo bench --bench hook_cli                  # 500 PreToolUse calls
//!     WB_BENCH_EVENT=SessionStart cargo bench --bench hook_cli
//!
//! Knobs (environment): WB_BENCH_CALLS (default 500), WB_BENCH_EVENT (default PreToolUse).

// A benchmark stops on the first failure: unwrapping is how it says so.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn main() {
    let calls: usize = std::env::var("WB_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let event = std::env::var("WB_BENCH_EVENT").unwrap_or_else(|_| "PreToolUse".into());
    let root = tempfile::tempdir().expect("tempdir");
    let payload = serde_json::json!({
        "session_id": "ac3ea6be-3f07-449d-ba6d-fe455f4016dc",
        "transcript_path": root.path().join("t.jsonl"),
        "cwd": root.path(),
        "hook_event_name": event,
        "source": "startup",
        "tool_name": "Bash",
        "tool_input": {"command": "cargo test"},
        "tool_use_id": "toolu_01",
    })
    .to_string();
    let spawned = |program: &str, args: &[&str]| {
        let started = Instant::now();
        let status = Command::new(program)
            .args(args)
            .stdout(Stdio::null())
            .status()
            .expect("spawn the baseline");
        assert!(status.success(), "{program} failed");
        started.elapsed()
    };
    let run = || {
        let started = Instant::now();
        let mut child = Command::new(env!("CARGO_BIN_EXE_wakebridge"))
            .arg("hook")
            .env_clear()
            .env("HOME", root.path().join("home"))
            .env("XDG_CONFIG_HOME", root.path().join("config"))
            .env("XDG_STATE_HOME", root.path().join("state"))
            .env("TMUX_PANE", "%3")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn wakebridge hook");
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(payload.as_bytes()).expect("payload");
        }
        let out = child.wait_with_output().expect("wait");
        let took = started.elapsed();
        assert!(out.status.success(), "hook failed");
        assert!(
            out.stderr.is_empty(),
            "hook complained: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        took
    };
    // The first call creates the ledger (migrations); real calls find it there.
    for _ in 0..20 {
        run();
    }
    let (mut times, mut starts, mut trues) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..calls {
        times.push(run());
        starts.push(spawned(env!("CARGO_BIN_EXE_wakebridge"), &["--version"]));
        trues.push(spawned("/bin/true", &[]));
    }
    for figures in [&mut times, &mut starts, &mut trues] {
        figures.sort();
    }
    let at = |v: &[Duration], q: f64| v[((v.len() - 1) as f64 * q) as usize].as_secs_f64() * 1000.0;
    println!(
        "hook_cli event={event} calls={calls}: p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, min {:.2} ms \
         (wakebridge --version: p50 {:.2} ms, min {:.2} ms; /bin/true: p50 {:.2} ms, min {:.2} ms)",
        at(&times, 0.5),
        at(&times, 0.9),
        at(&times, 0.99),
        at(&times, 0.0),
        at(&starts, 0.5),
        at(&starts, 0.0),
        at(&trues, 0.5),
        at(&trues, 0.0),
    );
}
