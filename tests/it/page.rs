//! The page at `/` in a real browser (headless Chromium over the DevTools protocol) against a
//! real daemon (in process, real HTTP) with sessions in known states: it loads with nothing on
//! its console, lists every session `/fleet` lists with its state, follows a change, acts only
//! with the secret where one is set, and no other site's page can act; a screenshot of it is
//! written for the README.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common;
use crate::common::browser::{self, Browser, GET_CHROMIUM};
use crate::common::harness::{TestServer, binary, event_for, fed};
use crate::common::tmux::TmuxServer;

const WORKING: &str = "0e0e0e0e-1111-4000-8000-000000000001";
const PAUSED: &str = "9a9a9a9a-2222-4000-8000-000000000002";
const SECRET: &str = "page-s3cret";

/// Far above what the page takes (docs/benchmarks.md has the figure): a loaded CI machine.
const SHOWN: Duration = Duration::from_secs(15);

/// A daemon (with `env`) that knows two sessions from their hooks (the real `wakebridge hook`,
/// each in a live pane of a private tmux server): one mid-turn, one idle that a person paused.
async fn two_sessions(env: &[(&str, &str)]) -> (TestServer, TmuxServer) {
    let tmux = TmuxServer::start();
    let socket = tmux.socket().display().to_string();
    let env = [env, &[("WAKEBRIDGE_MUX__TMUX_SOCKET", socket.as_str())]].concat();
    let server = TestServer::start(&env).await;
    let root = server.root.path().to_path_buf();
    let panes = [(); 2].map(|()| tmux.new_pane("sleep 600"));
    // Half of a 200k window used, as Claude Code writes an answer's usage.
    let transcript = root.join("transcript.jsonl");
    let usage = json!({"type": "assistant", "sessionId": WORKING, "requestId": "r", "uuid": "a",
        "timestamp": "2026-12-07T09:00:02.100Z", "message": {"id": "m", "role": "assistant",
        "model": "claude-sonnet-4-5", "usage": {"input_tokens": 10, "output_tokens": 5,
        "cache_creation_input_tokens": 0, "cache_read_input_tokens": 99_990}}});
    std::fs::write(&transcript, format!("{usage}\n")).expect("transcript");
    tokio::task::spawn_blocking(move || {
        for (sid, pane, events) in [
            (WORKING, &panes[0], ["SessionStart", "UserPromptSubmit"]),
            (PAUSED, &panes[1], ["SessionStart", "Stop"]),
        ] {
            for event in events {
                let mut payload =
                    json!({"hook_event_name": event, "session_id": sid, "cwd": "/src/demo"});
                if sid == WORKING {
                    payload["transcript_path"] = json!(transcript);
                }
                let mut hook = binary(&root, &[]);
                hook.env("TMUX_PANE", pane).arg("hook");
                assert!(
                    fed(hook, &payload.to_string()).status.success(),
                    "{payload}"
                );
            }
        }
    })
    .await
    .expect("hooks");
    let pause = json!({"session_ids": [PAUSED]});
    let answer = reqwest::Client::new()
        .post(server.url("/pause"))
        .bearer_auth(SECRET)
        .json(&pause)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200, "{}", answer.text().await.unwrap());
    (server, tmux)
}

/// Requests refused as another site's so far (`/metrics`; every daemon of the process counts).
async fn refused_for_origin(server: &TestServer) -> u64 {
    let metrics = server.get_text("/metrics").await;
    let line = (metrics.lines())
        .find(|line| line.starts_with(r#"wakebridge_rejections_total{reason="origin"}"#))
        .unwrap_or_else(|| panic!("no origin rejections counted: {metrics}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// The state the page shows for `sid` (`null` while it lists no such row).
fn state_of(sid: &str) -> String {
    format!(
        r#"(document.querySelector('tr[data-session="{sid}"] [data-state]')?.dataset.state ?? null)"#
    )
}

fn chromium() -> Option<PathBuf> {
    let found = browser::chromium();
    if found.is_none() {
        common::skip_or_fail("chromium is not on PATH", GET_CHROMIUM);
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_lists_every_session_and_follows_a_change() {
    let Some(chromium) = chromium() else { return };
    let (server, _tmux) = two_sessions(&[]).await;
    let fleet = server.get_json("/fleet").await;
    let sessions: Vec<Value> = fleet["machines"][0]["status"]["sessions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(sessions.len(), 2, "{fleet}");

    let mut page = Browser::open(&chromium, &server.url("/")).await;
    for session in &sessions {
        let (sid, state) = (session["id"].as_str().unwrap(), &session["state"]);
        let shows = format!("{} === {state}", state_of(sid));
        page.until(&shows, SHOWN).await;
        let row = format!(r#"document.querySelector('tr[data-session="{sid}"]').innerText"#);
        let row = page.eval(&row).await;
        assert!(
            row.as_str().unwrap().contains(&sid[..8]),
            "its short id: {row}"
        );
    }
    // A session at work before one a person paused.
    let state = |sid| sessions.iter().find(|s| s["id"] == sid).unwrap()["state"].clone();
    assert_eq!(
        (state(WORKING), state(PAUSED)),
        (json!("working"), json!("paused"))
    );
    let order = "[...document.querySelectorAll('tr[data-session]')].map(r => r.dataset.session)";
    assert_eq!(page.eval(order).await, json!([WORKING, PAUSED]));

    // Unpaused from outside the page (the CLI's route): the page shows it without a reload,
    // and the row of the session that did not change is the same element, its buttons too.
    let working_row = format!(r#"document.querySelector('tr[data-session="{WORKING}"]')"#);
    page.eval(&format!("{working_row}.dataset.marked = 'yes'"))
        .await;
    let (code, body) = server
        .post_json("/unpause", json!({"session_ids": [PAUSED]}))
        .await;
    assert_eq!(code, 200, "{body}");
    let now = server.session(PAUSED).await["state"].clone();
    assert_ne!(now, "paused", "{now}");
    let took = page
        .until(&format!("{} === {now}", state_of(PAUSED)), SHOWN)
        .await;
    eprintln!("the page showed the change {took:?} after /sessions did");
    let kept = page.eval(&format!("{working_row}.dataset.marked")).await;
    assert_eq!(kept, "yes", "the unchanged row was drawn anew");
    page.eval("1").await;
    assert!(page.problems.is_empty(), "{:#?}", page.problems);

    // Light and dark, as the person's system asks.
    let background = "getComputedStyle(document.body).backgroundColor";
    page.prefer("light").await;
    assert_eq!(page.eval(background).await, "rgb(255, 255, 255)");
    page.prefer("dark").await;
    assert_eq!(page.eval(background).await, "rgb(13, 17, 23)");
    server.stop().await;
}

/// The history a session's transcript gives (half its window used), sampled every second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_charts_draw_the_series_history_serves() {
    let Some(chromium) = chromium() else { return };
    // Sampled every second and kept a minute: the charts' span, a sample a point.
    let (server, _tmux) = two_sessions(&[
        ("WAKEBRIDGE_PAGE__SAMPLE_INTERVAL", "1s"),
        ("WAKEBRIDGE_PAGE__HISTORY", "1m"),
    ])
    .await;
    let history = common::eventually_ok("two samples of its context", SHOWN, async || {
        let history = server.get_json("/history").await;
        let context = (history["series"].as_array().into_iter().flatten())
            .find(|s| s["kind"] == "context" && s["key"] == WORKING)
            .cloned();
        match context {
            Some(series) if series["points"].as_array().unwrap().len() >= 2 => Ok(history),
            _ => Err(format!("{history}")),
        }
    })
    .await;
    let series = history["series"].as_array().unwrap();
    let context: Vec<&Value> = series.iter().filter(|s| s["kind"] == "context").collect();
    assert_eq!(
        context.len(),
        1,
        "only the session with a transcript: {history}"
    );
    assert_eq!(context[0]["points"][0][1], 50.0, "{history}");

    let mut page = Browser::open(&chromium, &server.url("/")).await;
    page.until("!!window.wakebridgeCharts?.context", SHOWN)
        .await;
    let drawn = "(() => { const c = wakebridgeCharts.context; \
                 return { labels: c.series.slice(1).map(s => s.label), \
                 drawn: c.data[1].filter(v => v !== null), \
                 canvas: c.root.querySelector('canvas').width }; })()";
    let drawn = page.eval(drawn).await;
    assert_eq!(drawn["labels"], json!([&WORKING[..8]]), "{drawn}");
    let values = drawn["drawn"].as_array().unwrap();
    assert!(values.len() >= 2, "{drawn}");
    assert!(values.iter().all(|v| v == 50.0), "{drawn}");
    assert!(drawn["canvas"].as_u64().unwrap() > 0, "{drawn}");
    // The table's context bar says the same.
    let bar = format!(
        r#"document.querySelector('tr[data-session="{WORKING}"] [data-percent]')?.textContent"#
    );
    page.until(&format!("{bar} === ' 50 %'"), SHOWN).await;
    page.eval("1").await;
    assert!(page.problems.is_empty(), "{:#?}", page.problems);

    page.until(&format!("{} !== null", state_of(PAUSED)), SHOWN)
        .await;
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("page.png");
    let _ = std::fs::remove_file(&shot);
    page.screenshot(&shot).await;
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG"), "not a PNG: {}", shot.display());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_acts_with_the_secret_and_without_it_says_why() {
    let Some(chromium) = chromium() else { return };
    let (server, _tmux) = two_sessions(&[("AGENT_EVENT_BUS_BRIDGE_SECRET", SECRET)]).await;
    let mut page = Browser::open(&chromium, &server.url("/")).await;
    page.until(&format!("{} !== null", state_of(WORKING)), SHOWN)
        .await;
    let pause = format!(
        r#"document.querySelector('tr[data-session="{WORKING}"] button[data-verb="pause"]').click()"#
    );

    page.eval(&pause).await;
    page.until(
        "document.getElementById('said').textContent.includes('bearer')",
        SHOWN,
    )
    .await;
    assert_eq!(
        page.eval("document.getElementById('secret').hidden").await,
        false
    );
    assert_ne!(server.session(WORKING).await["state"], "paused");

    let give = format!(
        "document.getElementById('bearer').value = '{SECRET}'; \
         document.getElementById('secret').requestSubmit()"
    );
    page.eval(&give).await;
    page.eval(&pause).await;
    page.until(&format!("{} === 'paused'", state_of(WORKING)), SHOWN)
        .await;
    assert_eq!(server.session(WORKING).await["state"], "paused");
    // Every session at once, with the secret the tab kept, which the page never shows.
    page.eval("document.getElementById('pause-all').click()")
        .await;
    let all = common::eventually_ok("every session paused", SHOWN, async || {
        let sessions = server.get_json("/sessions").await;
        match sessions["paused"].is_object() {
            true => Ok(sessions),
            false => Err(format!("{sessions}")),
        }
    })
    .await;
    assert_eq!(all["paused"]["all"], true, "{all}");
    let shown = page.eval("document.documentElement.outerHTML").await;
    assert!(
        !shown.as_str().unwrap().contains(SECRET),
        "the secret is on the page"
    );
    assert_eq!(
        page.eval("document.getElementById('bearer').value").await,
        ""
    );
    page.eval("1").await;
    // The refused pause's 401 is the browser's own console line; nothing else.
    let unexpected: Vec<_> = (page.problems.iter())
        .filter(|p| !p.contains("401"))
        .collect();
    assert!(unexpected.is_empty(), "{unexpected:#?}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_site_s_page_cannot_act_on_a_daemon_without_a_secret() {
    let Some(chromium) = chromium() else { return };
    let (target, _tmux) = two_sessions(&[]).await;
    // Another site: a blank page of another origin, in the same browser.
    let elsewhere = browser::other_site().await;
    let mut page = Browser::open(&chromium, &format!("http://{elsewhere}/")).await;
    page.until("document.readyState === 'complete'", SHOWN)
        .await;
    let refused_before = refused_for_origin(&target).await;
    let url = target.url("/pause");
    let body = json!({"session_ids": [WORKING]}).to_string();
    // As JSON the browser asks first, and the daemon answers no preflight: nothing is sent.
    let json_post = format!(
        "fetch('{url}', {{method: 'POST', headers: {{'Content-Type': 'application/json'}}, \
         body: '{body}'}}).then(r => 'sent ' + r.status, e => 'blocked')"
    );
    assert_eq!(page.eval(&json_post).await, "blocked");
    // As a simple request it is sent, opaque to the page, and refused for its Origin.
    let simple_post = format!(
        "fetch('{url}', {{method: 'POST', mode: 'no-cors', body: '{body}'}}).then(() => 'sent')"
    );
    assert_eq!(page.eval(&simple_post).await, "sent");
    assert_ne!(target.session(WORKING).await["state"], "paused");
    // A read too (an <img> would do the same): opaque to the page, yet refused before any work.
    let read = format!(
        "fetch('{}', {{mode: 'no-cors'}}).then(() => 'sent')",
        target.url("/history?hours=168")
    );
    assert_eq!(page.eval(&read).await, "sent");
    // Each refused for where it came from: the preflight, the simple POST, the read.
    let refused = refused_for_origin(&target).await;
    assert!(
        refused >= refused_before + 3,
        "{refused_before} -> {refused}"
    );

    // The Origin check on its own, with the right content type: another site is refused, the
    // daemon's own page and clients that send no Origin are not.
    let client = reqwest::Client::new();
    let post = |origin: Option<String>| {
        let mut request = client
            .post(target.url("/pause"))
            .json(&json!({"session_ids": [WORKING]}));
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };
    let foreign = post(Some(format!("http://{elsewhere}"))).await.unwrap();
    assert_eq!(foreign.status(), 403);
    let said: Value = foreign.json().await.unwrap();
    assert!(
        said["error"].as_str().unwrap().contains("may not use"),
        "{said}"
    );
    assert_eq!(post(Some("null".into())).await.unwrap().status(), 403);
    assert_ne!(target.session(WORKING).await["state"], "paused");
    let own = post(Some(format!("http://{}", target.addr))).await.unwrap();
    assert_eq!(own.status(), 200);
    assert_eq!(target.session(WORKING).await["state"], "paused");
    target.stop().await;
}

/// The console is really watched: a page that logs an error is caught.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_error_on_a_page_is_seen() {
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("broken.html");
    std::fs::write(&file, "<script>console.error('broken')</script>").unwrap();
    let mut page = Browser::open(&chromium, &format!("file://{}", file.display())).await;
    page.until("document.readyState === 'complete'", SHOWN)
        .await;
    page.eval("1").await;
    assert!(
        page.problems.iter().any(|p| p.contains("broken")),
        "{:#?}",
        page.problems
    );
}

/// The budget's "at this pace", as the page computes it from a window's samples.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pace_of_a_window_is_projected_from_its_samples_since_it_began() {
    let Some(chromium) = chromium() else { return };
    let server = TestServer::start(&[]).await;
    let mut page = Browser::open(&chromium, &server.url("/")).await;
    page.until("typeof projection === 'function'", SHOWN).await;
    // 20 % in the 20 minutes to 09:50 UTC, 60 % an hour: at 40 % then, full at 10:50, 16 min
    // 40 s before a reset at 11:06:40.
    let now = 1_796_637_600_000_i64;
    let s = now / 1000;
    let project = |points: String, reset_s: i64| {
        format!("projection({points}, new Date({reset_s} * 1000).toISOString(), {now})")
    };
    let steady = format!("[[{}, 20], [{}, 40]]", s - 1800, s - 600);
    let full = page.eval(&project(steady.clone(), s + 4000)).await;
    let at = page
        .eval(&format!(
            "new Date({} * 1000).toLocaleTimeString([], {{hour: '2-digit', minute: '2-digit'}})",
            s + 3000
        ))
        .await;
    assert_eq!(
        full,
        json!(format!(
            "100 % at {}, 17 min before the reset",
            at.as_str().unwrap()
        ))
    );
    // The same pace with the reset in 20 minutes: 40 + 30 used, 30 left.
    let early = page.eval(&project(steady, s + 1200)).await;
    assert_eq!(early, "30 % unused at the reset");
    // A window that began again (its use fell) counts from the fall only.
    let fallen = format!(
        "[[{}, 90], [{}, 95], [{}, 5], [{}, 25]]",
        s - 3000,
        s - 2000,
        s - 1800,
        s - 600
    );
    let after_fall = page.eval(&project(fallen, s + 1200)).await;
    assert_eq!(after_fall, "45 % unused at the reset");
    // Too little to tell (under five minutes of samples), or the reset passed: nothing said.
    let short = format!("[[{}, 20], [{}, 40]]", s - 200, s - 100);
    assert_eq!(page.eval(&project(short, s + 1200)).await, "");
    let steady = format!("[[{}, 20], [{}, 40]]", s - 1800, s - 600);
    assert_eq!(page.eval(&project(steady, s - 1)).await, "");
    server.stop().await;
}

/// Figures for docs/benchmarks.md: `cargo test --test it page::measure -- --ignored --nocapture`.
/// The page's weight, its first render with 100 sessions (navigation to the table drawn), how
/// long a change takes to show after `/sessions` shows it, and the history a session adds to the
/// ledger in a week.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement, prints figures"]
async fn measure_the_page_with_100_sessions() {
    const SESSIONS: usize = 100;
    const ROUNDS: usize = 10;
    let chromium = browser::chromium().expect("chromium");
    let server = TestServer::start(&[]).await;
    let root = server.root.path().to_path_buf();
    let ids: Vec<String> = (0..SESSIONS)
        .map(|n| format!("{n:08x}-0000-4000-8000-000000000000"))
        .collect();
    let hooked = ids.clone();
    tokio::task::spawn_blocking(move || {
        for sid in &hooked {
            let payload = json!({"hook_event_name": "SessionStart", "session_id": sid,
                "cwd": "/src/fleet"});
            let mut hook = binary(&root, &[]);
            hook.arg("hook");
            assert!(fed(hook, &payload.to_string()).status.success());
        }
    })
    .await
    .unwrap();
    let page_bytes = server.get_text("/").await.len();

    let mut page = Browser::open(&chromium, &server.url("/")).await;
    let listed = format!("document.querySelectorAll('tr[data-session]').length === {SESSIONS}");
    let mut renders = Vec::new();
    for _ in 0..ROUNDS {
        page.eval("location.reload()").await;
        page.until("document.readyState === 'complete'", SHOWN)
            .await;
        page.until(&listed, SHOWN).await;
        let at = page.eval("window.wakebridgeFirstRender").await;
        renders.push(at.as_f64().unwrap());
    }
    let mut changes = Vec::new();
    for sid in ids.iter().take(ROUNDS) {
        let (code, _) = server
            .post_json("/pause", json!({"session_ids": [sid]}))
            .await;
        assert_eq!(code, 200);
        let shown = server.session(sid).await["pause"].is_object();
        assert!(shown, "/sessions shows the pause");
        let paused = format!(
            r#"document.querySelector('tr[data-session="{sid}"] td:nth-child(9)').textContent !== ''"#
        );
        changes.push(page.until(&paused, SHOWN).await);
    }
    renders.sort_by(f64::total_cmp);
    changes.sort();
    println!(
        "page: {page_bytes} bytes; first render with {SESSIONS} sessions over {ROUNDS} loads: \
         median {:.0} ms, max {:.0} ms; a change shown after /sessions: median {:?}, max {:?}",
        renders[ROUNDS / 2],
        renders[ROUNDS - 1],
        changes[ROUNDS / 2],
        changes[ROUNDS - 1]
    );

    // A week of every session's context a minute apart (a million samples), then the page's
    // week: what /history serves and how long the page takes to draw it.
    let ledger =
        wakebridge::store::Store::open(&common::harness::ledger_of(server.root.path())).unwrap();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    for day in 0..7_i64 {
        let samples: Vec<_> = (0..24 * 60_i64)
            .flat_map(|minute| {
                let at_ms = now_ms - (day * 24 * 60 + minute + 1) * 60_000;
                ids.iter().map(move |sid| wakebridge::store::Sample {
                    at_ms,
                    kind: wakebridge::api::HistoryKind::Context,
                    key: sid.clone(),
                    value: (minute % 100) as f64,
                })
            })
            .collect();
        ledger.record_samples(samples).await.unwrap();
    }
    let started = std::time::Instant::now();
    let week = server.get_text("/history?hours=168").await;
    let served = started.elapsed();
    let drawn = "(async () => { const t = performance.now(); \
                 document.getElementById('span').value = '168'; await drawHistory(); \
                 return [performance.now() - t, wakebridgeCharts.context.data[0].length]; })()";
    let drawn = page.eval(drawn).await;
    println!(
        "history: a week of {SESSIONS} sessions a minute apart: /history?hours=168 is {} bytes, \
         served in {served:?}; the page fetched and drew it in {:.0} ms ({} points a line)",
        week.len(),
        drawn[0].as_f64().unwrap(),
        drawn[1]
    );
    server.stop().await;

    // A week of one session's context samples, a minute apart, in a ledger of its own.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("week.db");
    let store = wakebridge::store::Store::open(&path).unwrap();
    let size = || {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
        std::fs::metadata(&path).unwrap().len()
    };
    let empty = size();
    let week: Vec<_> = (0..7 * 24 * 60)
        .map(|minute| wakebridge::store::Sample {
            at_ms: 1_796_000_000_000 + minute * 60_000,
            kind: wakebridge::api::HistoryKind::Context,
            key: ids[0].clone(),
            value: (minute % 1000) as f64 / 10.0,
        })
        .collect();
    store.record_samples(week).await.unwrap();
    drop(store);
    println!(
        "history: one session-week (10,080 samples) adds {} bytes to the ledger",
        size() - empty
    );
}

/// The page's long poll waits while nothing changes, answers at a change, and lets the daemon
/// stop at once rather than after its 25 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_long_poll_waits_for_a_change_and_ends_with_the_daemon() {
    let server = TestServer::start(&[]).await;
    let client = reqwest::Client::new();
    let poll = |seen: String| {
        let request = client.get(server.url(&format!("/changes?seen={seen}")));
        tokio::spawn(async move {
            let answer: Value = request.send().await.unwrap().json().await.unwrap();
            answer["tag"].as_str().unwrap().to_owned()
        })
    };
    let tag = server.get_json("/changes").await["tag"]
        .as_str()
        .unwrap()
        .to_owned();
    let waiting = poll(tag.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!waiting.is_finished(), "answered with nothing changed");
    let (code, body) = server.hook(event_for(WORKING, 1), &[]).await;
    assert_eq!(code, 200, "{body}");
    let changed = tokio::time::timeout(SHOWN, waiting).await.unwrap().unwrap();
    assert_ne!(changed, tag, "a new session is a change");

    let waiting = poll(changed.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stopping = std::time::Instant::now();
    server.stop().await;
    assert!(
        stopping.elapsed() < Duration::from_secs(10),
        "the stop waited {:?} for the poll",
        stopping.elapsed()
    );
    let answered = tokio::time::timeout(SHOWN, waiting).await;
    assert!(matches!(answered, Ok(Ok(_))), "{answered:?}");
}

/// The page's policy names its own two scripts (its own and uPlot) and allows no other.
#[tokio::test]
async fn the_page_s_policy_runs_its_own_scripts_only() {
    let server = TestServer::start(&[]).await;
    let answer = reqwest::get(server.url("/")).await.unwrap();
    let policy = answer.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    let scripts = policy
        .split(';')
        .find_map(|part| part.trim().strip_prefix("script-src "))
        .unwrap_or_else(|| panic!("no script-src: {policy}"));
    assert_eq!(scripts.matches("'sha256-").count(), 2, "{policy}");
    assert!(!scripts.contains("unsafe"), "{policy}");
    assert!(policy.contains("connect-src 'self'"), "{policy}");
    server.stop().await;
}

#[tokio::test]
async fn history_says_what_a_bad_span_is() {
    let server = TestServer::start(&[]).await;
    let answer = reqwest::get(server.url("/history?hours=a-day"))
        .await
        .unwrap();
    assert_eq!(answer.status(), 400);
    let said: Value = answer.json().await.unwrap();
    assert!(
        said["error"]
            .as_str()
            .unwrap()
            .contains("whole number of hours"),
        "{said}"
    );
    let week = server.get_json("/history?hours=168").await;
    assert_eq!(
        week["to"].as_i64().unwrap() - week["from"].as_i64().unwrap(),
        7 * 86_400
    );
    server.stop().await;
}
