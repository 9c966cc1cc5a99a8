//! `wakebridge status`, `forget` and id prefixes against a real daemon (in process, real HTTP)
//! whose sessions came from the real `wakebridge hook` binary fed Claude Code's payloads, as an
//! agent's hooks would, with the ledger and panes.json on disk.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Output, Stdio};

use unicode_width::UnicodeWidthStr;

use crate::common;
use crate::common::harness::{TestServer, binary, event_for, fed};
use crate::common::tmux::TmuxServer;

/// Three agents, as UUIDs: two share their first block's first four digits.
const WORKING: &str = "a1b2c3d4-1111-4000-8000-000000000001";
const IDLE: &str = "a1b2ffee-2222-4000-8000-000000000002";
const ENDED: &str = "c0ffee00-3333-4000-8000-000000000003";

/// Runs `wakebridge hook` with `payload` on stdin, in tmux pane `pane` when given.
fn hook(root: &Path, payload: &str, pane: Option<&str>) {
    let mut cmd = binary(root, &[]);
    if let Some(pane) = pane {
        cmd.env("TMUX_PANE", pane);
    }
    cmd.arg("hook");
    assert!(fed(cmd, payload).status.success(), "hook failed: {payload}");
}

fn event(name: &str, sid: &str, project: &str) -> String {
    format!(
        r#"{{"hook_event_name":"{name}","session_id":"{sid}","cwd":"/home/me/src/{project}","transcript_path":"/home/me/.claude/projects/p/{sid}.jsonl"}}"#
    )
}

/// Three sessions through their hooks: one mid-turn, one whose turn ended, one that ended.
fn three_agents(root: &Path) {
    three_agents_in(root, ["%11", "%12", "%13"]);
}

/// [`three_agents`] in the panes given.
fn three_agents_in(root: &Path, panes: [&str; 3]) {
    let [working, idle, ended] = panes.map(Some);
    hook(root, &event("SessionStart", WORKING, "wakebridge"), working);
    hook(
        root,
        &event("UserPromptSubmit", WORKING, "wakebridge"),
        working,
    );
    let long = "a-project-with-a-long-long-name";
    hook(root, &event("SessionStart", IDLE, long), idle);
    hook(root, &event("Stop", IDLE, long), idle);
    hook(root, &event("SessionStart", ENDED, "docs"), ended);
    hook(root, &event("SessionEnd", ENDED, "docs"), ended);
}

async fn cli(server: &TestServer, args: &[&str]) -> Output {
    let root = server.root.path().to_path_buf();
    let mut args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    args.extend(["--url".into(), format!("http://{}", server.addr)]);
    tokio::task::spawn_blocking(move || binary(&root, &[]).args(&args).output().expect("run"))
        .await
        .expect("join")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

async fn session_ids(server: &TestServer) -> Vec<String> {
    let body = server.get_json("/sessions").await;
    body["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|s| s["session_id"].as_str().expect("id").to_owned())
        .collect()
}

#[tokio::test]
async fn status_shows_every_hooked_session_at_a_glance_within_100_columns() {
    // The agents' panes are live in a private tmux server the daemon reads.
    let tmux = TmuxServer::start();
    let socket = tmux.socket().display().to_string();
    let server = TestServer::start(&[("WAKEBRIDGE_MUX__TMUX_SOCKET", &socket)]).await;
    let panes = [(); 3].map(|()| tmux.new_pane("sleep 600"));
    let root = server.root.path().to_path_buf();
    let in_panes = panes.clone();
    tokio::task::spawn_blocking(move || three_agents_in(&root, in_panes.each_ref().map(|p| &**p)))
        .await
        .expect("hooks");
    let out = cli(&server, &["status"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for line in text.lines() {
        assert!(line.width() <= 100, "{} columns: {line}", line.width());
    }
    assert!(!text.contains('\x1b'), "no ANSI into a pipe: {text:?}");
    let mut lines = text.lines();
    let header = lines.next().expect("header");
    assert!(
        header.starts_with(&format!(
            "wakebridge {} \u{b7} pid ",
            env!("CARGO_PKG_VERSION")
        )) && header.contains(" \u{b7} up ")
            && header.contains("bus: registration off")
            && header.ends_with("3 sessions"),
        "{header}"
    );
    assert!(
        lines
            .next()
            .expect("columns")
            .starts_with("SESSION   PROJECT")
    );
    let line = |id: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{id}  ")))
            .unwrap_or_else(|| panic!("no {id} in\n{text}"))
            .to_owned()
    };
    let working = line(&WORKING[..8]);
    assert!(
        working.contains("  wakebridge  ") && working.contains(&format!("  {}  ", panes[0])),
        "{working}"
    );
    assert!(
        working.contains("  working  ")
            && (working.contains("s ago  ") || working.contains("  now  ")),
        "{working}"
    );
    let idle = line(&IDLE[..8]);
    assert!(
        idle.contains("  idle  ") && idle.contains("\u{2026}"),
        "{idle}"
    );
    // Ended a moment ago: still in view, at the end.
    let ended = line(&ENDED[..8]);
    assert!(
        ended.contains("  docs  ") && ended.contains("  ended  "),
        "{ended}"
    );
    assert!(text.trim_end().ends_with(&ended));
    // `--json` is the daemon's body unchanged.
    let json = cli(&server, &["status", "--json"]).await;
    let printed: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    let body = server.get_json("/sessions").await;
    assert_eq!(printed["sessions"].as_array().map(Vec::len), Some(3));
    assert_eq!(
        printed["sessions"][0]["session_id"],
        body["sessions"][0]["session_id"]
    );
}

#[tokio::test]
async fn forget_drops_a_session_once_and_refuses_a_mapped_one_without_force() {
    let server = TestServer::start(&[]).await;
    let root = server.root.path().to_path_buf();
    tokio::task::spawn_blocking(move || three_agents(&root))
        .await
        .expect("hooks");
    // By a prefix: the ended one goes.
    let out = cli(&server, &["forget", "c0ff"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), format!("{ENDED}: forgotten"));
    assert!(!session_ids(&server).await.contains(&ENDED.to_owned()));
    // The second time the prefix names nothing, and the full id is the daemon's 404.
    let again = cli(&server, &["forget", "c0ff"]).await;
    assert_eq!(again.status.code(), Some(2));
    assert!(
        stderr(&again)
            .contains("no session starts with \"c0ff\"; `wakebridge status --all` lists them"),
        "{}",
        stderr(&again)
    );
    let full = cli(&server, &["forget", ENDED]).await;
    assert_eq!(full.status.code(), Some(2));
    assert!(
        stderr(&full).contains("404: no session"),
        "{}",
        stderr(&full)
    );
    let raw = server
        .client
        .post(server.url("/forget"))
        .json(&serde_json::json!({"session_id": ENDED}))
        .send()
        .await
        .expect("request");
    assert_eq!(raw.status().as_u16(), 404);
    // A mapped one is refused (409) until --force, which unmaps it too.
    let refused = cli(&server, &["forget", &WORKING[..8]]).await;
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains(
            "409: session a1b2c3d4-1111-4000-8000-000000000001 is mapped to tmux pane %11"
        ),
        "{}",
        stderr(&refused)
    );
    assert!(session_ids(&server).await.contains(&WORKING.to_owned()));
    let forced = cli(&server, &["forget", &WORKING[..8], "--force"]).await;
    assert!(forced.status.success(), "{}", stderr(&forced));
    assert_eq!(
        stdout(&forced).trim(),
        format!("{WORKING}: forgotten, and unmapped from panes.json")
    );
    assert_eq!(session_ids(&server).await, [IDLE.to_owned()]);
    let panes = std::fs::read_to_string(server.wake_dir.join("panes.json")).expect("panes.json");
    assert!(!panes.contains(WORKING) && panes.contains(IDLE), "{panes}");
}

#[tokio::test]
async fn wake_takes_a_unique_prefix_and_names_an_ambiguous_one() {
    let server = TestServer::start(&[]).await;
    for (sid, id) in [(WORKING, 1), (IDLE, 2)] {
        let (status, _) = server.hook(event_for(sid, id), &[]).await;
        assert_eq!(status, 200);
    }
    let woke = cli(&server, &["wake", "a1b2c"]).await;
    assert_eq!(
        stdout(&woke).trim(),
        format!("{WORKING}: spool-unmapped"),
        "{}",
        stderr(&woke)
    );
    let ambiguous = cli(&server, &["wake", "a1b2"]).await;
    assert_eq!(ambiguous.status.code(), Some(2));
    assert!(
        stderr(&ambiguous)
            .contains("\"a1b2\" matches a1b2c3d4\u{2026}, a1b2ffee\u{2026}; type more characters"),
        "{}",
        stderr(&ambiguous)
    );
    let none = cli(&server, &["wake", "ee"]).await;
    assert_eq!(none.status.code(), Some(2));
    assert!(stderr(&none).contains("no session starts with \"ee\""));
    // A bus name that is no UUID's prefix goes to /wake as typed, never completed to another.
    let named = cli(&server, &["wake", "deploy-bot"]).await;
    assert_eq!(
        stdout(&named).trim(),
        "deploy-bot: spool-unmapped",
        "{}",
        stderr(&named)
    );
    // A full id the daemon never saw goes to /wake unchanged.
    let unknown = "deadbeef-0000-4000-8000-00000000000f";
    let full = cli(&server, &["wake", unknown]).await;
    assert_eq!(
        stdout(&full).trim(),
        format!("{unknown}: spool-unmapped"),
        "{}",
        stderr(&full)
    );
}

#[tokio::test]
async fn watch_redraws_without_ansi_into_a_pipe_and_exits_0_on_ctrl_c() {
    let server = TestServer::start(&[]).await;
    server.hook(event_for(WORKING, 1), &[]).await;
    let root = server.root.path().to_path_buf();
    let url = format!("http://{}", server.addr);
    let (status, seen) = tokio::task::spawn_blocking(move || {
        let mut child = binary(&root, &[])
            .args(["status", "--watch", "--url", &url])
            .stdout(Stdio::piped())
            .spawn()
            .expect("status --watch");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut seen = Vec::new();
        // Two frames: the header line twice.
        let mut headers = 0;
        while headers < 2 {
            let line = lines.next().expect("a frame line").expect("utf8");
            headers += usize::from(line.starts_with("wakebridge "));
            seen.push(line);
        }
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        (child.wait().expect("wait"), seen)
    })
    .await
    .expect("join");
    assert_eq!(status.code(), Some(0), "{seen:?}");
    assert!(seen.iter().all(|l| !l.contains('\x1b')), "{seen:?}");
    assert!(
        seen.iter().any(|l| l.starts_with(&WORKING[..8])),
        "{seen:?}"
    );
}

#[tokio::test]
async fn rewind_takes_a_unique_prefix_of_a_mapped_session() {
    let dir = common::tempdir();
    // The mux backend (rewinds need the nudger) on a tmux socket nobody serves: the rewind is
    // only recorded here.
    let socket = dir.path().join("no-tmux.sock").display().to_string();
    let server = TestServer::start(&[
        ("AGENT_EVENT_BUS_BRIDGE_BACKEND", "mux"),
        ("WAKEBRIDGE_MUX__TMUX_SOCKET", &socket),
        ("WAKEBRIDGE_CONTEXT__ENABLED", "false"),
    ])
    .await;
    // A pane of its own for each (one pane maps one id).
    for (sid, pane) in [(WORKING, "%21"), (IDLE, "%22")] {
        let target = wakebridge::wakedir::target::PaneTarget::Tmux {
            pane: pane.into(),
            session: None,
        };
        wakebridge::wakedir::set_entry(&server.wake_dir, sid, &target).expect("map");
    }
    let out = cli(&server, &["rewind", "--session", "a1b2f"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with(&format!("{IDLE}: rewind asked for")),
        "{}",
        stdout(&out)
    );
    // The old spelling, kept as an alias so existing command lines still work.
    let ambiguous = cli(&server, &["rewind", "--session-id", "a1b2"]).await;
    assert_eq!(ambiguous.status.code(), Some(2));
    assert!(stderr(&ambiguous).contains("type more characters"));
}

#[tokio::test]
async fn context_takes_a_prefix_through_the_daemon_and_a_full_id_without_it() {
    let server = TestServer::start(&[]).await;
    let root = server.root.path();
    three_agents(root);
    let project = root.join("home/.claude/projects/-home-me-src-wakebridge");
    std::fs::create_dir_all(&project).expect("projects dir");
    let usage = format!(
        r#"{{"type":"assistant","sessionId":"{WORKING}","requestId":"r","message":{{"id":"m","role":"assistant","model":"claude-sonnet-4-5","usage":{{"input_tokens":10,"cache_creation_input_tokens":0,"cache_read_input_tokens":99990,"output_tokens":5}}}},"uuid":"a","timestamp":"2026-11-30T09:00:02.100Z"}}"#
    );
    std::fs::write(project.join(format!("{WORKING}.jsonl")), usage + "\n").expect("transcript");
    let by_prefix = cli(&server, &["context", "--session", "a1b2c", "--json"]).await;
    assert!(by_prefix.status.success(), "{}", stderr(&by_prefix));
    let figures: serde_json::Value = serde_json::from_str(&stdout(&by_prefix)).expect("JSON");
    assert_eq!(figures["session_id"], WORKING, "{figures}");
    assert_eq!(figures["used_tokens"], 100_000, "{figures}");
    let ambiguous = cli(&server, &["context", "--session", "a1b2"]).await;
    assert_eq!(ambiguous.status.code(), Some(2));
    assert!(
        stderr(&ambiguous).contains("type more characters"),
        "{}",
        stderr(&ambiguous)
    );
    // A full id needs no daemon: pointed at nothing, it still reads the transcript.
    let offline = tokio::task::spawn_blocking({
        let root = root.to_path_buf();
        move || {
            binary(&root, &[])
                .args([
                    "context",
                    "--session",
                    WORKING,
                    "--url",
                    "http://127.0.0.1:9",
                ])
                .output()
                .expect("run")
        }
    })
    .await
    .expect("join");
    assert!(offline.status.success(), "{}", stderr(&offline));
}

/// Runs `wakebridge statusline` with Claude Code's status-line JSON on stdin; its line.
fn status_line(root: &Path, payload: &str) -> String {
    let mut cmd = binary(root, &[]);
    cmd.arg("statusline");
    let out = fed(cmd, payload);
    assert!(out.status.success(), "statusline failed: {payload}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn with_windows(sid: &str, five: (f64, i64), week: (f64, i64)) -> String {
    in_account("/home/me/.claude", sid, five, week)
}

fn in_account(account: &str, sid: &str, five: (f64, i64), week: (f64, i64)) -> String {
    serde_json::json!({
        "session_id": sid,
        "transcript_path": format!("{account}/projects/p/{sid}.jsonl"),
        "model": {"id": "claude-sonnet-5-5"},
        "context_window": {"context_window_size": 1_000_000, "used_percentage": 12},
        "rate_limits": {
            "five_hour": {"used_percentage": five.0, "resets_at": five.1},
            "seven_day": {"used_percentage": week.0, "resets_at": week.1},
        },
    })
    .to_string()
}

#[tokio::test]
async fn the_windows_a_status_line_reported_show_in_status_sessions_and_metrics() {
    let server = TestServer::start(&[]).await;
    let root = server.root.path().to_path_buf();
    let now_s = i64::try_from(wakebridge::clock::now_s()).expect("now");
    let (five_reset, week_reset) = (now_s + 2 * 3600, now_s + 3 * 86_400);
    let feed = root.clone();
    let line = tokio::task::spawn_blocking(move || {
        let line = status_line(
            &feed,
            &with_windows(IDLE, (62.4, five_reset), (41.0, week_reset)),
        );
        // Another session's status line repeating an older, lower figure of the same window
        // does not lower it.
        status_line(
            &feed,
            &with_windows(WORKING, (30.0, five_reset), (20.0, week_reset)),
        );
        line
    })
    .await
    .expect("status lines");
    assert_eq!(
        line.trim_end(),
        "ctx 12% \u{b7} idle",
        "the status bar is unchanged"
    );

    let body = server.get_json("/sessions").await;
    let budgets = body["budgets"].as_array().expect("budgets");
    assert_eq!(budgets.len(), 1, "{body:#}");
    assert_eq!(budgets[0]["account"], "/home/me/.claude");
    assert_eq!(budgets[0]["five_hour"]["used_percentage"], 62.4);
    assert_eq!(budgets[0]["five_hour"]["stale"], false);
    assert_eq!(budgets[0]["seven_day"]["used_percentage"], 41.0);
    let reset: jiff::Timestamp = budgets[0]["five_hour"]["resets_at"]
        .as_str()
        .expect("resets_at")
        .parse()
        .expect("a time");
    assert_eq!(reset.as_second(), five_reset);

    let metrics = server.get_text("/metrics").await;
    for sample in [
        "wakebridge_budget_used_ratio{window=\"five_hour\"} 0.624\n",
        "wakebridge_budget_used_ratio{window=\"seven_day\"} 0.41\n",
    ] {
        assert!(metrics.contains(sample), "{sample} in\n{metrics}");
    }

    let out = cli(&server, &["status"]).await;
    let text = stdout(&out);
    let shown = text.lines().nth(1).expect("a second header line");
    let clock = reset
        .to_zoned_datetime(jiff::tz::TimeZone::system())
        .strftime("%H:%M")
        .to_string();
    assert_eq!(
        shown,
        format!("budget: 5h 62% \u{b7} resets {clock} \u{b7} week 41%")
    );

    // A new window replaces the old one. Another account is its own, named in the header; its
    // window past its reset is not shown at all, and the metric is the most used account's.
    let feed = root.clone();
    tokio::task::spawn_blocking(move || {
        status_line(
            &feed,
            &with_windows(IDLE, (3.0, now_s + 5 * 3600), (41.0, week_reset)),
        );
        let other = in_account(
            "/home/me/work",
            ENDED,
            (70.0, five_reset),
            (99.0, now_s - 1),
        );
        status_line(&feed, &other);
    })
    .await
    .expect("status line");
    let body = server.get_json("/sessions").await;
    assert_eq!(body["budgets"][0]["five_hour"]["used_percentage"], 3.0);
    assert_eq!(body["budgets"][1]["account"], "/home/me/work");
    assert!(body["budgets"][1]["seven_day"].is_null(), "{body:#}");
    let metrics = server.get_text("/metrics").await;
    assert!(
        metrics.contains("{window=\"five_hour\"} 0.7\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("{window=\"seven_day\"} 0.41\n"),
        "{metrics}"
    );
    let text = stdout(&cli(&server, &["status"]).await);
    let shown = text.lines().nth(1).expect("a second header line");
    assert!(
        shown.starts_with("budget: 5h 3% \u{b7} resets ")
            && shown.contains(" \u{b7} week 41% (/home/me/.claude); 5h 70% \u{b7} resets "),
        "{shown}"
    );
}
