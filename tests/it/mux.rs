//! The mux module against a real tmux server on a private socket (one per test, killed by a
//! Drop guard) and against recording stand-in binaries for zellij and for tmux failure modes.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use wakebridge::deadline::Deadline;
use wakebridge::mux::{
    INJECT_BUDGET, InjectError, Injector, KeystrokeText, MuxConfig, MuxError, STEP_FLOOR,
    StaleReason, WAKE_PROMPT,
};

use crate::common;
use crate::common::CLAUDE;
use crate::common::process::process_is_running;
use crate::common::stand_in::{StandInBuilder, Step};
use crate::common::tmux::{TmuxServer, read_when_settled, recorder_pane};
use crate::common::{tmux_target, zellij_target};

/// Scheduling slack allowed on top of a budget in wall-clock assertions (2 shared cores).
const SLACK: Duration = Duration::from_millis(400);

fn fast_config(server: &TmuxServer) -> MuxConfig {
    MuxConfig {
        submit_delay: Duration::from_millis(100),
        ..server.config()
    }
}

#[tokio::test]
async fn types_the_prompt_then_one_carriage_return_into_a_live_pane() {
    let server = TmuxServer::start();
    let (pane, file) = recorder_pane(&server, "rec");
    let injector = Injector::new(&fast_config(&server));

    let done = injector
        .inject(
            &CLAUDE,
            None,
            &tmux_target(&pane),
            &KeystrokeText::wake_prompt(),
            Deadline::after(INJECT_BUDGET),
        )
        .await
        .expect("inject");

    assert_eq!(done, "tmux");
    let want = format!("{WAKE_PROMPT}\r");
    assert_eq!(
        String::from_utf8_lossy(&read_when_settled(&file, want.len())),
        want
    );
}

#[tokio::test]
async fn types_quotes_hashes_and_unicode_literally() {
    let server = TmuxServer::start();
    let (pane, file) = recorder_pane(&server, "rec");
    let injector = Injector::new(&fast_config(&server));
    let text =
        KeystrokeText::new("Say \"hi\" #{pane_id} ~ $HOME 'x' \u{e9} \u{2733} Enter C-m").unwrap();

    injector
        .inject(
            &CLAUDE,
            None,
            &tmux_target(&pane),
            &text,
            Deadline::after(INJECT_BUDGET),
        )
        .await
        .expect("inject");

    let want = format!("{text}\r");
    assert_eq!(
        String::from_utf8_lossy(&read_when_settled(&file, want.len())),
        want
    );
}

#[tokio::test]
async fn refuses_a_dead_pane_and_types_nothing() {
    let server = TmuxServer::start();
    server.tmux(&["set-option", "-g", "remain-on-exit", "on"]);
    let pane = server.new_pane("true");
    server.wait_for(&pane, "#{pane_dead}", "1");
    let injector = Injector::new(&fast_config(&server));

    let err = injector
        .inject(
            &CLAUDE,
            None,
            &tmux_target(&pane),
            &KeystrokeText::wake_prompt(),
            Deadline::after(INJECT_BUDGET),
        )
        .await
        .unwrap_err();

    assert!(
        matches!(
            err,
            InjectError::StalePane {
                reason: StaleReason::PaneDead
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.kind(), "stale");
}

#[tokio::test]
async fn refuses_a_pane_that_fell_back_to_a_shell_and_types_nothing() {
    let server = TmuxServer::start();
    // The agent is gone and an interactive shell owns the pane: a wake typed here would run
    // as a shell command.
    let pane = server.new_pane("exec bash --norc --noprofile -i");
    server.wait_for_bash_prompt(&pane);
    let injector = Injector::new(&fast_config(&server));

    let err = injector
        .inject(
            &CLAUDE,
            None,
            &tmux_target(&pane),
            &KeystrokeText::wake_prompt(),
            Deadline::after(INJECT_BUDGET),
        )
        .await
        .unwrap_err();

    match &err {
        InjectError::StalePane {
            reason: StaleReason::ShellInPane { command },
        } => assert_eq!(command, "bash"),
        other => panic!("expected ShellInPane, got {other:?}"),
    }
    assert!(err.to_string().contains("the session is gone"), "{err}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let screen = injector
        .tmux()
        .capture(&pane, Deadline::after(INJECT_BUDGET))
        .await
        .unwrap();
    assert!(!screen.contains("Check the event bus"), "{screen}");
}

#[tokio::test]
async fn types_into_an_agent_run_by_a_wrapper_shell() {
    // `sh -c 'agent; exec sleep'` keeps the shell as the group leader, so tmux reports `bash`
    // while the agent (here the recorder) runs in the foreground group: that pane is live.
    let server = TmuxServer::start();
    let file = server.dir().join("rec");
    let pane = server.new_pane(&format!(
        "bash -c \"stty raw -echo; cat > '{}'; exec sleep 600\"",
        file.display()
    ));
    let start = Instant::now();
    while !file.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "recorder never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(server.pane_format(&pane, "#{pane_current_command}"), "bash");
    let injector = Injector::new(&fast_config(&server));

    injector
        .inject(
            &CLAUDE,
            None,
            &tmux_target(&pane),
            &KeystrokeText::wake_prompt(),
            Deadline::after(INJECT_BUDGET),
        )
        .await
        .expect("inject");

    let want = format!("{WAKE_PROMPT}\r");
    assert_eq!(
        String::from_utf8_lossy(&read_when_settled(&file, want.len())),
        want
    );
}

#[tokio::test]
async fn refuses_a_missing_pane() {
    let server = TmuxServer::start();
    let injector = Injector::new(&fast_config(&server));

    let err = injector
        .inject(
            &CLAUDE,
            None,
            &tmux_target("%999"),
            &KeystrokeText::wake_prompt(),
            Deadline::after(INJECT_BUDGET),
        )
        .await
        .unwrap_err();

    assert!(
        matches!(
            err,
            InjectError::StalePane {
                reason: StaleReason::PaneMissing
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_server_that_is_gone_makes_the_pane_stale() {
    let dir = common::tempdir();
    let config = MuxConfig {
        tmux_socket: Some(dir.path().join("no-server")),
        ..MuxConfig::default()
    };
    let err = Injector::new(&config)
        .inject(
            &CLAUDE,
            None,
            &tmux_target("%0"),
            &KeystrokeText::wake_prompt(),
            Deadline::after(INJECT_BUDGET),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "stale", "{err:?}");
}

#[tokio::test]
async fn concurrent_injects_into_one_pane_never_interleave() {
    let server = TmuxServer::start();
    let (pane, file) = recorder_pane(&server, "rec");
    // A long pause between text and Enter gives the second caller every chance to cut in.
    let injector = Injector::new(&MuxConfig {
        submit_delay: Duration::from_millis(300),
        ..server.config()
    });
    let target = tmux_target(&pane);
    let alpha = KeystrokeText::new("Alpha one two").unwrap();
    let bravo = KeystrokeText::new("Bravo three four").unwrap();

    let (a, b) = tokio::join!(
        injector.inject(
            &CLAUDE,
            None,
            &target,
            &alpha,
            Deadline::after(INJECT_BUDGET)
        ),
        injector.inject(
            &CLAUDE,
            None,
            &target,
            &bravo,
            Deadline::after(INJECT_BUDGET)
        ),
    );
    a.expect("alpha");
    b.expect("bravo");

    let got = String::from_utf8_lossy(&read_when_settled(&file, 31)).into_owned();
    assert!(
        got == "Alpha one two\rBravo three four\r" || got == "Bravo three four\rAlpha one two\r",
        "interleaved: {got:?}"
    );
}

#[tokio::test]
async fn a_hung_tmux_is_killed_within_the_budget() {
    let dir = common::tempdir();
    let stand_in = StandInBuilder::new("tmux")
        .on("display-message", Step::Hang)
        .write(dir.path());
    let injector = Injector::new(&MuxConfig {
        tmux_bin: stand_in.bin.clone(),
        ..MuxConfig::default()
    });

    let start = Instant::now();
    let err = injector
        .inject(
            &CLAUDE,
            None,
            &tmux_target("%1"),
            &KeystrokeText::wake_prompt(),
            Deadline::after(INJECT_BUDGET),
        )
        .await
        .unwrap_err();
    let took = start.elapsed();

    assert!(
        matches!(err, InjectError::Failed(MuxError::Timeout { .. })),
        "{err:?}"
    );
    assert_eq!(err.kind(), "timeout");
    assert!(took >= INJECT_BUDGET, "gave up early: {took:?}");
    assert!(took <= INJECT_BUDGET + SLACK, "took {took:?}");
    let (child, grandchild) = stand_in.hang_pids().expect("stand-in recorded its pids");
    assert!(!process_is_running(child), "stand-in {child} still running");
    // The grandchild got SIGKILL with the group; give the kernel a moment.
    let mut gone = false;
    for _ in 0..50 {
        gone = !process_is_running(grandchild);
        if gone {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(gone, "grandchild {grandchild} survived");
    assert_eq!(stand_in.calls().len(), 1, "nothing after the guard");
}

#[tokio::test]
async fn a_missing_binary_is_a_spawn_failure() {
    let injector = Injector::new(&MuxConfig {
        tmux_bin: PathBuf::from("/nonexistent/wakebridge-test/tmux"),
        ..MuxConfig::default()
    });
    let err = injector
        .inject(
            &CLAUDE,
            None,
            &tmux_target("%1"),
            &KeystrokeText::wake_prompt(),
            Deadline::after(INJECT_BUDGET),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, InjectError::Failed(MuxError::Spawn { .. })),
        "{err:?}"
    );
    assert_eq!(err.kind(), "spawn");
}

#[tokio::test]
async fn a_failing_multiplexer_stderr_is_carried_collapsed_and_cut() {
    let dir = common::tempdir();
    let noise = "x".repeat(600);
    let stand_in = StandInBuilder::new("tmux")
        .on(
            "display-message",
            Step::Fail {
                stderr: format!("error:\n  Found argument '-p'   which wasn't expected\n{noise}"),
                code: 2,
            },
        )
        .write(dir.path());
    let injector = Injector::new(&MuxConfig {
        tmux_bin: stand_in.bin.clone(),
        ..MuxConfig::default()
    });

    let err = injector
        .inject(
            &CLAUDE,
            None,
            &tmux_target("%1"),
            &KeystrokeText::wake_prompt(),
            Deadline::after(INJECT_BUDGET),
        )
        .await
        .unwrap_err();

    assert_eq!(err.kind(), "exit");
    let InjectError::Failed(mux_err) = &err else {
        panic!("{err:?}")
    };
    let stderr = mux_err.stderr().expect("stderr kept");
    assert!(stderr.starts_with("error: Found argument '-p' which wasn't expected xxx"));
    assert_eq!(stderr.chars().count(), 300);
    assert!(err.to_string().contains("which wasn't expected"), "{err}");
    assert!(err.to_string().contains("exit status 2"), "{err}");
}

#[tokio::test]
async fn snapshot_reports_every_pane_in_one_call() {
    let server = TmuxServer::start();
    server.tmux(&["set-option", "-g", "remain-on-exit", "on"]);
    let (live, _) = recorder_pane(&server, "rec");
    let dead = server.new_pane("true");
    server.wait_for(&dead, "#{pane_dead}", "1");
    server.tmux(&["select-pane", "-t", &live, "-T", "\u{2733} Claude Code"]);
    let injector = Injector::new(&server.config());

    let panes = injector
        .tmux()
        .snapshot(Deadline::after(INJECT_BUDGET))
        .await
        .expect("snapshot");

    assert_eq!(panes.len(), 3, "{panes:?}");
    let info = &panes[&live];
    assert_eq!(info.current_command, "cat");
    assert!(!info.dead);
    assert_eq!(
        info.pid.map(|p| p.to_string()),
        Some(server.pane_format(&live, "#{pane_pid}"))
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let activity = info.window_activity.expect("window_activity");
    assert!(
        activity <= now && now - activity < 60,
        "{activity} vs {now}"
    );
    assert!(info.title.starts_with('\u{2733}'), "{:?}", info.title);
    assert!(panes[&dead].dead);
}

#[tokio::test]
async fn snapshot_of_no_server_is_empty() {
    let dir = common::tempdir();
    let injector = Injector::new(&MuxConfig {
        tmux_socket: Some(dir.path().join("none")),
        ..MuxConfig::default()
    });
    let panes = injector
        .tmux()
        .snapshot(Deadline::after(INJECT_BUDGET))
        .await
        .expect("snapshot");
    assert!(panes.is_empty());
}

#[tokio::test]
async fn capture_returns_the_visible_text() {
    let server = TmuxServer::start();
    let pane = server.new_pane("printf 'hello-capture'; exec sleep 30");
    let injector = Injector::new(&server.config());
    let start = Instant::now();
    loop {
        let screen = injector
            .tmux()
            .capture(&pane, Deadline::after(INJECT_BUDGET))
            .await
            .expect("capture");
        if screen.contains("hello-capture") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "{screen:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---- zellij, through a recording stand-in (the exact argv; tests/it/zellij.rs runs a real one) ----

const LIVE_SESSIONS: &str = "has:colon [Created 5m 2s ago] \nother [Created 1h ago] \n";
const LIVE_PANES: &str = r#"[{"id":0,"is_plugin":false,"is_focused":true,"exited":false,"title":"claude"},{"id":0,"is_plugin":true,"exited":false}]"#;

/// What zellij dumps of a pane with nothing drawn: its rows' line ends (never nothing: an empty
/// dump is a lost reply, asked again).
const BLANK_SCREEN: &str = "\n\n\n";

/// A stand-in zellij whose panes show a blank screen.
fn zellij_stand_in() -> StandInBuilder {
    StandInBuilder::new("zellij").on("dump-screen", Step::Print(BLANK_SCREEN.into()))
}

fn zellij_injector(bin: &std::path::Path) -> Injector {
    Injector::new(&MuxConfig {
        zellij_bin: bin.to_path_buf(),
        submit_delay: Duration::from_millis(100),
        ..MuxConfig::default()
    })
}

fn argv(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test]
async fn zellij_checks_then_writes_chars_then_a_carriage_return() {
    let dir = common::tempdir();
    let stand_in = zellij_stand_in()
        .on("list-sessions", Step::Print(LIVE_SESSIONS.into()))
        .on("list-panes", Step::Print(LIVE_PANES.into()))
        .write(dir.path());

    let done = zellij_injector(&stand_in.bin)
        .inject(
            &CLAUDE,
            None,
            &zellij_target("has:colon", "0"),
            &KeystrokeText::wake_prompt(),
            Deadline::after(INJECT_BUDGET),
        )
        .await
        .expect("inject");

    assert_eq!(done, "zellij");
    assert_eq!(
        stand_in.calls(),
        vec![
            argv(&["list-sessions", "-n"]),
            argv(&["--session", "has:colon", "action", "list-panes", "--json"]),
            // The screen, for a draft or a menu; this one shows no prompt line at all, so once
            // more (a frame caught mid-redraw shows none either)...
            argv(&["--session", "has:colon", "action", "dump-screen", "-p", "0"]),
            argv(&["--session", "has:colon", "action", "dump-screen", "-p", "0"]),
            argv(&[
                "--session",
                "has:colon",
                "action",
                "write-chars",
                "-p",
                "0",
                WAKE_PROMPT
            ]),
            // ...and again for the text: no prompt line, so Enter after the submit delay.
            argv(&["--session", "has:colon", "action", "dump-screen", "-p", "0"]),
            argv(&["--session", "has:colon", "action", "write", "-p", "0", "13"]),
        ]
    );
}

#[tokio::test]
async fn zellij_missing_session_is_stale_and_types_nothing() {
    let dir = common::tempdir();
    let stand_in = zellij_stand_in()
        .on(
            "list-sessions",
            Step::Fail {
                stderr: "No active zellij sessions found.\n".into(),
                code: 1,
            },
        )
        .write(dir.path());

    let err = zellij_injector(&stand_in.bin)
        .inject(
            &CLAUDE,
            None,
            &zellij_target("tenacious-lemur", "0"),
            &KeystrokeText::wake_prompt(),
            Deadline::after(INJECT_BUDGET),
        )
        .await
        .unwrap_err();

    assert!(
        matches!(
            err,
            InjectError::StalePane {
                reason: StaleReason::SessionMissing { .. }
            }
        ),
        "{err:?}"
    );
    // Asked three times (a real zellij 0.45.1 under load sometimes leaves a live session out of
    // a listing; see LISTING_ATTEMPTS in src/mux/zellij.rs), and nothing else.
    assert_eq!(stand_in.calls(), vec![argv(&["list-sessions", "-n"]); 3]);
}

#[tokio::test]
async fn zellij_exited_or_unlisted_session_is_stale() {
    let dir = common::tempdir();
    let stand_in = zellij_stand_in()
        .on(
            "list-sessions",
            Step::Print(
                "lemur [Created 2h ago] (EXITED - attach to resurrect)\nlemur-2 [Created 1m ago] \n"
                    .into(),
            ),
        )
        .on("list-panes", Step::Print(LIVE_PANES.into()))
        .write(dir.path());
    let injector = zellij_injector(&stand_in.bin);

    for (session, want_exited) in [("lemur", true), ("lem", false)] {
        let err = injector
            .inject(
                &CLAUDE,
                None,
                &zellij_target(session, "0"),
                &KeystrokeText::wake_prompt(),
                Deadline::after(INJECT_BUDGET),
            )
            .await
            .unwrap_err();
        let InjectError::StalePane { reason } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(
            matches!(reason, StaleReason::SessionExited { .. }),
            want_exited,
            "{session}: {reason:?}"
        );
    }
    assert!(stand_in.calls().iter().all(|c| c[0] == "list-sessions"));
}

#[tokio::test]
async fn zellij_missing_or_exited_pane_is_stale_and_types_nothing() {
    let dir = common::tempdir();
    let stand_in = zellij_stand_in()
        .on("list-sessions", Step::Print(LIVE_SESSIONS.into()))
        .on(
            "list-panes",
            Step::Print(r#"[{"id":0,"is_plugin":false,"exited":true}]"#.into()),
        )
        .write(dir.path());
    let injector = zellij_injector(&stand_in.bin);

    for (pane, want) in [
        ("terminal_0", StaleReason::PaneDead),
        ("3", StaleReason::PaneMissing),
    ] {
        let err = injector
            .inject(
                &CLAUDE,
                None,
                &zellij_target("other", pane),
                &KeystrokeText::wake_prompt(),
                Deadline::after(INJECT_BUDGET),
            )
            .await
            .unwrap_err();
        match err {
            InjectError::StalePane { reason } => assert_eq!(reason, want, "{pane}"),
            other => panic!("{pane}: {other:?}"),
        }
    }
    assert!(
        stand_in
            .calls()
            .iter()
            .all(|c| !c.iter().any(|a| a.starts_with("write")))
    );
}

#[tokio::test]
async fn zellij_without_list_panes_falls_back_to_the_session_check() {
    let dir = common::tempdir();
    let stand_in = zellij_stand_in()
        .on("list-sessions", Step::Print(LIVE_SESSIONS.into()))
        .on(
            "list-panes",
            Step::Fail {
                stderr: "error: unrecognized subcommand 'list-panes'\n".into(),
                code: 2,
            },
        )
        .write(dir.path());

    zellij_injector(&stand_in.bin)
        .inject(
            &CLAUDE,
            None,
            &zellij_target("other", "0"),
            &KeystrokeText::wake_prompt(),
            Deadline::after(INJECT_BUDGET),
        )
        .await
        .expect("falls back and types");
    // list-sessions, list-panes, dump-screen twice, write-chars, dump-screen, write.
    assert_eq!(stand_in.calls().len(), 7);
}

#[tokio::test]
async fn zellij_failed_submit_is_failed_with_its_stderr() {
    let dir = common::tempdir();
    let stand_in = zellij_stand_in()
        .on("list-sessions", Step::Print(LIVE_SESSIONS.into()))
        .on("list-panes", Step::Print(LIVE_PANES.into()))
        .on(
            "write",
            Step::Fail {
                stderr: "error: Found argument '-p' which wasn't expected".into(),
                code: 2,
            },
        )
        .write(dir.path());

    let err = zellij_injector(&stand_in.bin)
        .inject(
            &CLAUDE,
            None,
            &zellij_target("other", "0"),
            &KeystrokeText::wake_prompt(),
            Deadline::after(INJECT_BUDGET),
        )
        .await
        .unwrap_err();

    assert_eq!(err.kind(), "exit");
    assert!(err.to_string().contains("which wasn't expected"), "{err}");
    let calls = stand_in.calls();
    assert_eq!(calls.len(), 7);
    assert_eq!(calls[4][3], "write-chars");
}

#[tokio::test]
async fn zellij_hang_is_a_timeout_within_the_budget() {
    let dir = common::tempdir();
    let stand_in = zellij_stand_in()
        .on("list-sessions", Step::Print(LIVE_SESSIONS.into()))
        .on("list-panes", Step::Print(LIVE_PANES.into()))
        .on("write-chars", Step::Hang)
        .write(dir.path());

    let start = Instant::now();
    let err = zellij_injector(&stand_in.bin)
        .inject(
            &CLAUDE,
            None,
            &zellij_target("other", "0"),
            &KeystrokeText::wake_prompt(),
            Deadline::after(INJECT_BUDGET),
        )
        .await
        .unwrap_err();
    let took = start.elapsed();

    assert_eq!(err.kind(), "timeout", "{err:?}");
    assert!(took <= INJECT_BUDGET + SLACK, "took {took:?}");
    assert_eq!(
        stand_in.calls().len(),
        5,
        "no submit after a failed write-chars"
    );
    let (child, _) = stand_in.hang_pids().expect("pids");
    assert!(!process_is_running(child));
}

#[tokio::test]
async fn two_slow_calls_stay_within_the_budget_plus_one_floor() {
    let dir = common::tempdir();
    // write-chars uses most of the budget; the submit then only gets its floor and is cut.
    let stand_in = zellij_stand_in()
        .on("list-sessions", Step::Print(LIVE_SESSIONS.into()))
        .on("list-panes", Step::Print(LIVE_PANES.into()))
        .on("write-chars", Step::Slow(1.7))
        .on("write", Step::Slow(1.0))
        .write(dir.path());

    let start = Instant::now();
    let err = zellij_injector(&stand_in.bin)
        .inject(
            &CLAUDE,
            None,
            &zellij_target("other", "0"),
            &KeystrokeText::wake_prompt(),
            Deadline::after(INJECT_BUDGET),
        )
        .await
        .unwrap_err();
    let took = start.elapsed();

    assert_eq!(err.kind(), "timeout", "{err:?}");
    assert_eq!(stand_in.calls().len(), 7, "the submit was attempted");
    assert!(took > INJECT_BUDGET, "the submit got its floor: {took:?}");
    assert!(took <= INJECT_BUDGET + STEP_FLOOR + SLACK, "took {took:?}");
}

// ---- the real Claude Code TUI (opt-in: needs the binary, see the test's doc) ----

/// How long Claude Code may take to reach its prompt from a cold start.
const CLAUDE_START_TIMEOUT: Duration = Duration::from_secs(60);

/// Types the wake prompt into the real Claude Code TUI (on PATH; `.ci/run` installs it) the
/// moment its prompt first renders (the hardest moment found: an immediate Enter was lost there)
/// and checks, through a `UserPromptSubmit` hook, that the prompt was submitted, once.
/// `WB_TEST_SUBMIT_DELAY_MS` overrides the submit delay (the longest wait for the text to show)
/// to measure others. No network is needed: the submit is seen by the hook before any API
/// call, which then fails offline.
#[tokio::test]
async fn real_claude_code_submits_the_wake_prompt() {
    let Some(claude) = common::real_claude() else {
        common::skip_or_fail("no `claude` on PATH", common::GET_CLAUDE);
        return;
    };
    let server = TmuxServer::start();
    let home = server.dir().join("home");
    let work = server.dir().join("work");
    let hook_log = server.dir().join("submits.log");
    let settings = serde_json::json!({"hooks": {"UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": format!("echo submitted >> '{}'", hook_log.display())}
    ]}]}});
    common::claude_home(&home, &work, &settings);
    let key = common::CLAUDE_TEST_KEY;
    let pane = server.new_pane_in(
        &work,
        &format!(
            "env -i HOME='{}' TERM=xterm-256color PATH=/usr/bin:/bin ANTHROPIC_API_KEY={key} '{}'; \
             exec sleep 600",
            home.display(),
            claude.display()
        ),
    );

    let mut config = server.config();
    if let Some(ms) = std::env::var("WB_TEST_SUBMIT_DELAY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        config.submit_delay = Duration::from_millis(ms);
    }
    let injector = Injector::new(&config);
    let start = Instant::now();
    loop {
        let screen = injector
            .tmux()
            .capture(&pane, Deadline::after(INJECT_BUDGET))
            .await
            .unwrap_or_default();
        if screen.contains("for shortcuts") {
            break;
        }
        assert!(
            start.elapsed() < CLAUDE_START_TIMEOUT,
            "Claude Code never reached its prompt:\n{screen}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let typed = Instant::now();
    injector
        .inject(
            &CLAUDE,
            None,
            &tmux_target(&pane),
            &KeystrokeText::wake_prompt(),
            Deadline::after(INJECT_BUDGET),
        )
        .await
        .expect("inject");
    eprintln!("typed and confirmed in {:?}", typed.elapsed());

    let submitted = read_when_settled(&hook_log, "submitted".len());
    let screen = injector
        .tmux()
        .capture(&pane, Deadline::after(INJECT_BUDGET))
        .await
        .unwrap_or_default();
    assert_eq!(
        String::from_utf8_lossy(&submitted).trim(),
        "submitted",
        "the prompt was not submitted (submit delay {:?}):\n{screen}",
        config.submit_delay
    );
}
