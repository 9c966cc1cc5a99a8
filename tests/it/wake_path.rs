//! The wake path end to end: a bus event (or a manual wake) over real HTTP, a real tmux server on
//! a private socket, a pane running a recorder, panes.json and busy markers on disk.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;
use wakebridge::mux::WAKE_PROMPT;
use wakebridge::wakedir::target::PaneTarget;

use crate::common;
use crate::common::agent::Agent;
use crate::common::harness::{TestServer, event_for};
use crate::common::tmux::{TmuxServer, read_when_settled, recorder_pane};

fn map(wake_dir: &Path, sid: &str, pane: &str) {
    std::fs::create_dir_all(wake_dir).expect("wake dir");
    let target = PaneTarget::Tmux {
        pane: pane.into(),
        session: None,
    };
    wakebridge::wakedir::set_entry(wake_dir, sid, &target).expect("map pane");
}

async fn mux_server(tmux: &TmuxServer, extra: &[(&str, &str)]) -> TestServer {
    let socket = tmux.socket().display().to_string();
    let mut env = vec![
        ("AGENT_EVENT_BUS_BRIDGE_BACKEND", "mux"),
        ("WAKEBRIDGE_MUX__TMUX_SOCKET", socket.as_str()),
        ("WAKEBRIDGE_MUX__SUBMIT_DELAY", "100ms"),
    ];
    env.extend_from_slice(extra);
    TestServer::start(&env).await
}

fn expected_wake() -> Vec<u8> {
    format!("{WAKE_PROMPT}\r").into_bytes()
}

#[tokio::test]
async fn idle_mapped_session_gets_the_prompt_once_and_cooldown_spools_the_next() {
    let tmux = TmuxServer::start();
    let (pane, file) = recorder_pane(&tmux, "rec");
    let server = mux_server(&tmux, &[]).await;
    map(&server.wake_dir, "s1", &pane);
    let (status, body) = server.hook(event_for("s1", 1), &[]).await;
    assert_eq!(
        (status, body),
        (
            200,
            json!({"status": "delivered", "action": "tmux", "session_id": "s1"})
        )
    );
    let (_, body) = server.hook(event_for("s1", 2), &[]).await;
    assert_eq!(body["action"], "spool-cooldown");
    assert_eq!(
        read_when_settled(&file, expected_wake().len()),
        expected_wake()
    );
    assert_eq!(server.spool_lines("s1").len(), 2);
}

#[tokio::test]
async fn busy_marker_spools_without_typing_and_does_not_burn_the_cooldown() {
    let tmux = TmuxServer::start();
    let (pane, file) = recorder_pane(&tmux, "rec");
    let server = mux_server(&tmux, &[]).await;
    map(&server.wake_dir, "s1", &pane);
    wakebridge::wakedir::set_busy(&server.wake_dir, "s1").expect("busy");
    assert_eq!(
        server.hook(event_for("s1", 1), &[]).await.1["action"],
        "spool-busy"
    );
    wakebridge::wakedir::clear_busy(&server.wake_dir, "s1").expect("idle");
    assert_eq!(
        server.hook(event_for("s1", 2), &[]).await.1["action"],
        "tmux"
    );
    assert_eq!(
        read_when_settled(&file, expected_wake().len()),
        expected_wake()
    );
}

/// A recorder pane that first draws an input line holding `input` (ASCII `> ` prompt, so the
/// test does not depend on the server's locale).
fn prompt_pane(server: &TmuxServer, name: &str, input: &str) -> (String, PathBuf) {
    let file = server.dir().join(name);
    let pane = server.new_pane(&format!(
        "printf 'Done.\\n\\n> {input}\\n'; stty raw -echo; exec cat > '{}'",
        file.display()
    ));
    server.wait_for(&pane, "#{pane_current_command}", "cat");
    (pane, file)
}

#[tokio::test]
async fn a_draft_at_the_prompt_is_never_typed_over() {
    let tmux = TmuxServer::start();
    let (drafting, draft_file) = prompt_pane(&tmux, "draft", "half a thought");
    let (empty, empty_file) = prompt_pane(&tmux, "empty", "");
    let server = mux_server(&tmux, &[]).await;
    map(&server.wake_dir, "writer", &drafting);
    map(&server.wake_dir, "idle", &empty);
    assert_eq!(
        server.hook(event_for("writer", 1), &[]).await.1["action"],
        "spool-busy",
        "a human's draft would be submitted with the wake text"
    );
    assert_eq!(
        server.hook(event_for("idle", 2), &[]).await.1["action"],
        "tmux"
    );
    assert_eq!(
        read_when_settled(&empty_file, expected_wake().len()),
        expected_wake()
    );
    assert_eq!(std::fs::read(&draft_file).expect("recorder"), b"");
    // The cooldown was not spent on the held-back wake: once the draft is gone, it types.
    tmux.tmux(&["send-keys", "-R", "-t", &drafting]);
    tmux.tmux(&["clear-history", "-t", &drafting]);
    assert_eq!(
        server.hook(event_for("writer", 3), &[]).await.1["action"],
        "tmux"
    );
    assert_eq!(
        read_when_settled(&draft_file, expected_wake().len()),
        expected_wake()
    );
    assert_eq!(server.spool_lines("writer").len(), 2);
}

#[tokio::test]
async fn our_own_unsubmitted_prompt_is_submitted_not_typed_twice() {
    let tmux = TmuxServer::start();
    // What an earlier wake whose Enter was lost leaves at the prompt.
    let agent = Agent::spawn_with(&tmux, "leftover", "idle", &[], Some(WAKE_PROMPT));
    let server = mux_server(&tmux, &[]).await;
    map(&server.wake_dir, "s1", &agent.pane);
    common::eventually(
        "the leftover on the prompt line",
        Duration::from_secs(5),
        || {
            tmux.tmux(&["capture-pane", "-p", "-t", &agent.pane])
                .contains(WAKE_PROMPT)
        },
    )
    .await;
    assert_eq!(
        server.hook(event_for("s1", 1), &[]).await.1["action"],
        "tmux"
    );
    assert_eq!(
        read_when_settled(&agent.record, 1),
        b"\r",
        "only Enter, no second copy"
    );
    assert_eq!(agent.submitted(), [WAKE_PROMPT]);
}

#[tokio::test]
async fn unmapped_and_stale_panes_type_nothing() {
    let tmux = TmuxServer::start();
    let server = mux_server(&tmux, &[]).await;
    assert_eq!(
        server.hook(event_for("nobody", 1), &[]).await.1["action"],
        "spool-unmapped"
    );
    // The agent's pane fell back to a shell (the session is gone): never type into it.
    let shell = tmux.new_pane("bash --norc --noprofile");
    tmux.wait_for_bash_prompt(&shell);
    map(&server.wake_dir, "gone", &shell);
    let answer = server.hook(event_for("gone", 2), &[]).await.1;
    // Seen once as `spool-mux-failed` in a fresh clone's first run (cause not known): the
    // session's row names the failure's kind (`timeout`, `exit`, `spawn`) if it happens again.
    let sessions = server.get_json("/sessions").await;
    assert_eq!(answer["action"], "spool-stale-pane", "{sessions}");
    map(&server.wake_dir, "missing", "%999");
    assert_eq!(
        server.hook(event_for("missing", 3), &[]).await.1["action"],
        "spool-stale-pane"
    );
    let screen = tmux.tmux(&["capture-pane", "-p", "-t", &shell]);
    assert!(!screen.contains("Check the event bus"), "{screen}");
    assert_eq!(server.spool_lines("gone").len(), 1);
}

#[tokio::test]
async fn hung_multiplexer_answers_well_inside_five_seconds() {
    let tmux = TmuxServer::start();
    let (pane, _) = recorder_pane(&tmux, "rec");
    let hang = tmux.dir().join("hung-tmux");
    std::fs::write(&hang, "#!/bin/sh\nexec sleep 30\n").expect("script");
    std::fs::set_permissions(&hang, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let bin = hang.display().to_string();
    let server = mux_server(&tmux, &[("WAKEBRIDGE_MUX__TMUX_BIN", bin.as_str())]).await;
    map(&server.wake_dir, "s1", &pane);
    let started = Instant::now();
    let (status, body) = server.hook(event_for("s1", 1), &[]).await;
    let took = started.elapsed();
    assert_eq!(status, 200);
    assert!(
        matches!(
            body["action"].as_str(),
            Some("spool-mux-failed" | "spool-stale-pane")
        ),
        "{body}"
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert_eq!(server.spool_lines("s1").len(), 1);
}

#[tokio::test]
async fn manual_wake_goes_through_the_same_gate() {
    let tmux = TmuxServer::start();
    let (pane, file) = recorder_pane(&tmux, "rec");
    let secret = "s3cret";
    let server = mux_server(&tmux, &[("AGENT_EVENT_BUS_BRIDGE_SECRET", secret)]).await;
    map(&server.wake_dir, "s1", &pane);
    let wake = |body: serde_json::Value, token: Option<&str>, host: Option<&str>| {
        let mut req = server.client.post(server.url("/wake")).json(&body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(h) = host {
            req = req.header("host", h);
        }
        async move {
            let resp = req.send().await.expect("request");
            (
                resp.status().as_u16(),
                resp.json::<serde_json::Value>().await.unwrap_or_default(),
            )
        }
    };
    assert_eq!(wake(json!({"session_id": "s1"}), None, None).await.0, 401);
    assert_eq!(
        wake(json!({"session_id": "s1"}), Some("wrong"), None)
            .await
            .0,
        401
    );
    assert_eq!(
        wake(
            json!({"session_id": "s1"}),
            Some(secret),
            Some("evil.example")
        )
        .await
        .0,
        421
    );
    let (status, body) = wake(
        json!({"session_id": "s1", "message": "nope"}),
        Some(secret),
        None,
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.contains("continue") && e.contains("status")),
        "{body}"
    );
    let (status, _) = wake(
        json!({"session_id": "s1", "text": "rm -rf /"}),
        Some(secret),
        None,
    )
    .await;
    assert_eq!(status, 400, "request text is never accepted");
    assert_eq!(
        wake(json!({"session_id": "../x"}), Some(secret), None)
            .await
            .0,
        400
    );

    wakebridge::wakedir::set_busy(&server.wake_dir, "s1").expect("busy");
    assert_eq!(
        wake(json!({"session_id": "s1"}), Some(secret), None)
            .await
            .1["action"],
        "spool-busy"
    );
    let (status, body) = wake(
        json!({"session_id": "s1", "force": true}),
        Some(secret),
        None,
    )
    .await;
    assert_eq!(
        (status, body),
        (
            200,
            json!({"status": "delivered", "action": "tmux", "session_id": "s1"})
        )
    );
    assert_eq!(
        read_when_settled(&file, expected_wake().len()),
        expected_wake()
    );
}

#[tokio::test]
async fn manual_wake_types_a_configured_message_by_name() {
    let tmux = TmuxServer::start();
    let (pane, file) = recorder_pane(&tmux, "rec");
    let server = mux_server(&tmux, &[]).await;
    map(&server.wake_dir, "s1", &pane);
    let resp = server
        .client
        .post(server.url("/wake"))
        .json(&json!({"session_id": "s1", "message": "continue"}))
        .send()
        .await
        .expect("request");
    assert_eq!(
        resp.json::<serde_json::Value>().await.expect("json")["action"],
        "tmux"
    );
    let want = b"Please continue with the task at hand.\r".to_vec();
    assert_eq!(read_when_settled(&file, want.len()), want);
}

/// A restart must not reopen a cooldown window, nor repeat a wake for a redelivered event.
#[tokio::test]
async fn restart_keeps_the_cooldown_and_the_delivered_identities() {
    let tmux = TmuxServer::start();
    let (pane, file) = recorder_pane(&tmux, "rec");
    let server = mux_server(&tmux, &[]).await;
    map(&server.wake_dir, "s1", &pane);
    let first = event_for("s1", 1);
    assert_eq!(server.hook(first.clone(), &[]).await.1["action"], "tmux");
    assert_eq!(
        read_when_settled(&file, expected_wake().len()),
        expected_wake()
    );
    let root = server.stop().await;
    let socket = tmux.socket().display().to_string();
    let server = TestServer::start_in(
        root,
        &[
            ("AGENT_EVENT_BUS_BRIDGE_BACKEND", "mux"),
            ("WAKEBRIDGE_MUX__TMUX_SOCKET", socket.as_str()),
            ("WAKEBRIDGE_MUX__SUBMIT_DELAY", "100ms"),
        ],
        wakebridge::config::Flags::default(),
    )
    .await;
    let (_, again) = server.hook(first, &[]).await;
    assert_eq!(
        (again["action"].as_str(), again["duplicate"].as_bool()),
        (Some("tmux"), Some(true))
    );
    assert_eq!(
        server.hook(event_for("s1", 2), &[]).await.1["action"],
        "spool-cooldown"
    );
    assert_eq!(
        read_when_settled(&file, expected_wake().len()),
        expected_wake(),
        "typed once in all"
    );
}
