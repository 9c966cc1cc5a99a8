//! A person's controls end to end, against the daemon in process and the scripted agent in a
//! pane of a private tmux server firing the real `wakebridge hook`. `wakebridge pause`: a paused
//! session gets nothing, not even its Stop hook's payment; its events wait, owed, across a
//! restart, and are paid once when it is unpaused or the pause runs out. `[schedule]`: outside
//! its active hours a session is not nudged, yet bus events still wake it.

use std::time::Duration;

use serde_json::json;
use wakebridge::mux::WAKE_PROMPT;

use crate::common::harness::{TestServer, binary, event_for};
use crate::common::rig::{SID, session_until, spawn_agent, start_daemon, start_daemon_with};
use crate::common::tmux::TmuxServer;

/// How long "nothing happens" is watched: many nudger polls.
const QUIET: Duration = Duration::from_millis(2500);

/// Runs `wakebridge <args> --url <the daemon>`: its exit code and what it printed.
async fn cli(server: &TestServer, args: &[&str]) -> (i32, String) {
    let mut cmd = binary(server.root.path(), &[]);
    cmd.args(args)
        .args(["--url", &format!("http://{}", server.addr)]);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_session_gets_nothing_and_what_waited_is_paid_once_unpaused() {
    let tmux = TmuxServer::start();
    let server = start_daemon(&tmux, None).await;
    let agent = spawn_agent(&tmux, &server, "busy", true);
    wakebridge::wakedir::set_busy(&server.wake_dir, SID).unwrap();
    let (code, said) = cli(&server, &["pause", SID]).await;
    assert_eq!((code, said.trim()), (0, format!("{SID}: paused").as_str()));

    let (_, body) = server.hook(event_for(SID, 1), &[]).await;
    assert_eq!(body["action"], "spool-paused", "{body}");
    // The turn ends: its Stop hook keeps nothing going while the session is paused.
    agent.set("idle");
    tokio::time::sleep(QUIET).await;
    assert!(agent.submitted().is_empty(), "{:?}", agent.submitted());
    let paused = session_until(&server, "paused and owed", |s| s["state"] == "paused").await;
    assert_eq!(paused["owed"]["events"], 1, "{paused}");
    assert!(paused["pause"]["until"].is_null(), "{paused}");

    // Kept across a restart.
    let root = server.stop().await;
    let server = start_daemon(&tmux, Some(root)).await;
    session_until(&server, "still paused", |s| s["state"] == "paused").await;
    tokio::time::sleep(QUIET).await;
    assert!(agent.submitted().is_empty(), "{:?}", agent.submitted());

    let (code, said) = cli(&server, &["unpause", SID]).await;
    assert_eq!(
        (code, said.trim()),
        (0, format!("{SID}: unpaused").as_str())
    );
    let paid = session_until(&server, "paid once unpaused", |s| s["owed"].is_null()).await;
    assert_eq!(paid["paid"]["last_how"], "typed", "{paid}");
    tokio::time::sleep(QUIET).await;
    assert_eq!(agent.submitted(), [WAKE_PROMPT]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_of_every_session_for_a_while_lifts_by_itself() {
    let tmux = TmuxServer::start();
    let server = start_daemon(&tmux, None).await;
    let agent = spawn_agent(&tmux, &server, "idle", true);
    let (code, said) = cli(&server, &["pause", "--all", "--for", "3s"]).await;
    assert_eq!(code, 0, "{said}");
    assert!(said.starts_with("every session: paused until "), "{said}");
    let (_, body) = server.hook(event_for(SID, 1), &[]).await;
    assert_eq!(body["action"], "spool-paused", "{body}");
    // Unpausing one session leaves the pause of all of them standing, and says so.
    let (code, said) = cli(&server, &["unpause", SID]).await;
    assert_eq!(code, 0, "{said}");
    assert!(
        said.starts_with(&format!("{SID}: had no pause of its own")),
        "{said}"
    );
    assert!(said.contains("every session is still paused"), "{said}");
    assert!(agent.submitted().is_empty());

    let paid = session_until(&server, "paid once the pause ran out", |s| {
        s["owed"].is_null()
    })
    .await;
    assert_eq!(paid["state"], "working", "{paid}");
    assert_eq!(agent.submitted(), [WAKE_PROMPT]);
}

/// A name no session has is paused for when one comes, and the answer says so: `pause all` is
/// likely a slip for `--all`.
#[tokio::test]
async fn a_pause_of_a_name_no_session_has_says_so() {
    let server = TestServer::start(&[]).await;
    let (code, said) = cli(&server, &["pause", "all"]).await;
    assert_eq!(code, 0, "{said}");
    assert!(said.starts_with("all: paused\n"), "{said}");
    assert!(said.contains("no session is known as all yet"), "{said}");
    assert!(said.contains("`--all` pauses every session"), "{said}");
}

/// A pause of every session holds the ones to come, so `status` shows it with none known yet.
#[tokio::test]
async fn a_pause_of_every_session_shows_in_status_before_any_session() {
    let server = TestServer::start(&[]).await;
    let (code, said) = cli(&server, &["pause", "--all", "--for", "1h"]).await;
    assert_eq!(code, 0, "{said}");
    let listed = server.get_json("/sessions").await;
    assert_eq!(listed["paused"]["all"], true, "{listed}");
    assert!(listed["paused"]["until"].is_string(), "{listed}");
    let (code, shown) = cli(&server, &["status"]).await;
    assert_eq!(code, 0, "{shown}");
    assert!(shown.contains("every session paused until "), "{shown}");

    let (code, said) = cli(&server, &["unpause", "--all"]).await;
    assert_eq!(code, 0, "{said}");
    assert!(server.get_json("/sessions").await["paused"].is_null());
    let (_, shown) = cli(&server, &["status"]).await;
    assert!(!shown.contains("paused"), "{shown}");
}

#[tokio::test]
async fn a_pause_request_names_sessions_or_all_and_a_sane_time() {
    let server = TestServer::start(&[]).await;
    for (body, says) in [
        (json!({}), "one of the two"),
        (json!({"all": true, "session_ids": ["a"]}), "one of the two"),
        (
            json!({"session_ids": ["no spaces"]}),
            "session_id must match",
        ),
        (json!({"all": true, "for_s": 0}), "from 1 s"),
        (json!({"all": true, "for_s": 0.999}), "from 1 s"),
        (json!({"all": true, "for_s": -5}), "from 1 s"),
        (json!({"all": true, "for_s": 1e12}), "to 30 days"),
        (json!({"all": true, "until": 5}), "unknown field"),
    ] {
        let (status, answer) = server.post_json("/pause", body.clone()).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert!(answer.to_string().contains(says), "{body}: {answer}");
    }
    let (status, answer) = server
        .post_json("/unpause", json!({"all": true, "for_s": 5}))
        .await;
    assert_eq!(status, 400, "{answer}");
    let (status, answer) = server
        .post_json(
            "/pause",
            json!({"session_ids": ["s-1", "s-2"], "for_s": 60}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["session_ids"], json!(["s-1", "s-2"]));
    assert!(answer["until"].is_string(), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_its_active_hours_a_session_is_not_nudged_yet_bus_events_wake_it() {
    // An hour-long window two hours from now, in the zone the daemon reads hours in.
    let hour = (jiff::Timestamp::now().to_zoned_datetime(jiff::tz::TimeZone::system())).hour();
    let hours = format!("{:02}:00-{:02}:00", (hour + 2) % 24, (hour + 3) % 24);
    let tmux = TmuxServer::start();
    let fast = [
        ("WAKEBRIDGE_NUDGER__POLL_INTERVAL", "200ms"),
        ("WAKEBRIDGE_NUDGER__IDLE_AFTER", "1s"),
        ("WAKEBRIDGE_NUDGER__BASE_COOLDOWN", "1s"),
        ("WAKEBRIDGE_SCHEDULE__ACTIVE_HOURS", hours.as_str()),
    ];
    let server = start_daemon_with(&tmux, None, &fast).await;
    let agent = spawn_agent(&tmux, &server, "idle", true);
    let quiet = session_until(&server, "quiet hours", |s| {
        s["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("quiet hours until"))
    })
    .await;
    assert_eq!(quiet["state"], "idle", "{quiet}");
    tokio::time::sleep(QUIET).await;
    assert!(
        agent.submitted().is_empty(),
        "nudged: {:?}",
        agent.submitted()
    );

    let (_, body) = server.hook(event_for(SID, 1), &[]).await;
    assert_eq!(body["action"], "tmux", "{body}");
}
