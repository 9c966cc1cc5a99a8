//! Context windows followed by the session loop as `serve` runs it: real transcript files the
//! tests append to, a real SQLite ledger, real busy markers and panes.json, and a real tmux
//! server on a private socket whose pane records every keystroke the wake gate types. Every
//! server and task a test starts is stopped by a Drop guard.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use wakebridge::app::App;
use wakebridge::clock;
use wakebridge::config::{self, Config, Flags};
use wakebridge::context::statefile::state_path;
use wakebridge::context::statusline::{Feed, FeedUsage, write_feed};
use wakebridge::env::Env;
use wakebridge::mux::{Injector, MuxConfig};
use wakebridge::rewind::restart::RestartSettings;
use wakebridge::session::gate::Gate;
use wakebridge::session::task::{Keeper, LiveIo, run};
use wakebridge::session::{SessionConfig, SessionViews, Sessions};
use wakebridge::store::{LimitSource, Record, SessionSeen, Store};
use wakebridge::telemetry::notice::{Notice, NoticeKind, Notices};
use wakebridge::wakedir;
use wakebridge::wakedir::target::PaneTarget;

use crate::common;
use crate::common::env::test_env;
use crate::common::tmux::TmuxServer;
use crate::common::{TestResult, append};

const SID: &str = "3f0c9a52-8d1e-4c7b-9a44-2b6f1e0d7c11";
/// A 200k-window model in the built-in table: tokens / 2000 is the percentage.
const MODEL: &str = "claude-sonnet-4-5-20250929";
/// Monitor poll interval in these tests.
const POLL: Duration = Duration::from_millis(150);
/// Longest wait for something the monitor should do within a few polls.
const WAIT: Duration = Duration::from_secs(8);
/// How long "nothing more happens" is watched: several polls.
const QUIET: Duration = Duration::from_millis(1200);

const WRAP_UP: &str = "wrap up the current step and summarise where you are.";
const CHECKPOINT: &str = "checkpoint now - write down state and next steps before it runs out.";

fn assistant(input: u64) -> String {
    format!(
        r#"{{"parentUuid":"p","isSidechain":false,"type":"assistant","sessionId":"{SID}","message":{{"id":"m","role":"assistant","model":"{MODEL}","content":[{{"type":"text","text":"ok"}}],"usage":{{"input_tokens":{input},"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":5}}}},"uuid":"a"}}"#
    ) + "\n"
}

fn compact_boundary(post: u64) -> String {
    format!(
        r#"{{"isSidechain":false,"type":"system","subtype":"compact_boundary","compactMetadata":{{"trigger":"auto","preTokens":170000,"postTokens":{post}}},"uuid":"c"}}"#
    ) + "\n"
}

/// The session loop over a directly built gate and ledger (as `App::build` builds them).
struct Rig {
    root: tempfile::TempDir,
    wake_dir: PathBuf,
    state_dir: PathBuf,
    claude_dir: PathBuf,
    config: Config,
    gate: Arc<Gate>,
    store: Store,
    sessions: Arc<Sessions>,
    views: Option<watch::Receiver<SessionViews>>,
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
    /// The notices for a human the gate was handed.
    notices: tokio::sync::mpsc::Receiver<Notice>,
}

impl Rig {
    fn new(mux: MuxConfig) -> Result<Rig, Box<dyn std::error::Error>> {
        let root = common::tempdir();
        // The loop tells its warnings, as it does with the (default) mux backend.
        let env = Env::from(test_env(
            root.path(),
            &[("AGENT_EVENT_BUS_BRIDGE_BACKEND", "mux")],
        ));
        let config: Config = config::resolve(&Flags::default(), &env)?;
        let wake_dir = config.paths.wake_dir.clone();
        wakedir::ensure_wake_dir(&wake_dir)?;
        let state_dir = config.paths.state_dir.clone();
        let claude_dir = root.path().join("claude");
        std::fs::create_dir_all(claude_dir.join("projects").join("-work-proj"))?;
        let injector = Arc::new(Injector::new(&mux));
        let store = Store::open(&root.path().join("ledger.db"))?;
        let (notices, queue) = Notices::channel();
        let sessions = Arc::new(Sessions::default());
        let gate = Arc::new(
            Gate::new(
                wake_dir.clone(),
                config.busy_ttl,
                Duration::ZERO,
                injector,
                store.clone(),
                true,
                sessions.clone(),
            )
            .with_notices(notices, Duration::from_secs(900)),
        );
        Ok(Rig {
            root,
            wake_dir,
            state_dir,
            claude_dir,
            config,
            gate,
            store,
            sessions,
            views: None,
            shutdown: CancellationToken::new(),
            task: None,
            notices: queue,
        })
    }

    fn transcript(&self) -> PathBuf {
        self.claude_dir
            .join("projects")
            .join("-work-proj")
            .join(format!("{SID}.jsonl"))
    }

    fn latest_file(&self) -> PathBuf {
        self.root.path().join("latest-ctx")
    }

    fn start(&mut self) -> TestResult {
        self.start_polling_every(POLL)
    }

    fn start_polling_every(&mut self, poll: Duration) -> TestResult {
        let mut settings = self.config.settings.clone();
        settings.context.poll_interval = poll;
        settings.nudger.poll_interval = poll;
        settings.context.latest_state_file = self.latest_file().display().to_string();
        let homes = vec![self.claude_dir.clone()];
        let config = SessionConfig::from_settings(&settings, self.state_dir.clone(), homes, true)?;
        let restarts = RestartSettings {
            command: vec!["claude".into()],
            timeout: Duration::from_secs(90),
            claude_home: None,
            mux: MuxConfig::default(),
        };
        let io = LiveIo::new(
            self.gate.clone(),
            self.store.clone(),
            self.wake_dir.clone(),
            None,
            restarts,
            config.context.clone(),
        );
        let (views, seen) = watch::channel(SessionViews::default());
        let keeper = Keeper::new(config, io, self.sessions.clone(), views);
        self.views = Some(seen);
        self.task = Some(tokio::spawn(run(keeper, self.shutdown.clone())));
        Ok(())
    }

    fn context(&self) -> serde_json::Value {
        let views = self.views.as_ref().map(|v| v.borrow().clone());
        (views.and_then(|v| v.sessions.get(SID)?.context.clone()))
            .map(|c| serde_json::to_value(c).expect("context view"))
            .unwrap_or_default()
    }

    async fn stop(&mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(WAIT, task).await;
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn wait_until(what: &str, cond: impl FnMut() -> bool) -> TestResult {
    common::eventually(what, WAIT, cond).await;
    Ok(())
}

fn recorded(file: &Path) -> String {
    String::from_utf8_lossy(&std::fs::read(file).unwrap_or_default()).into_owned()
}

fn wrap_up(pct: u32) -> String {
    format!("Context is {pct}% full: {WRAP_UP}\r")
}

fn checkpoint(pct: u32) -> String {
    format!("Context is {pct}% full: {CHECKPOINT}\r")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warns_once_per_crossing_and_waits_for_idle() -> TestResult {
    let server = TmuxServer::start();
    let record = server.dir().join("typed");
    let pane = server.new_pane(&format!(
        "stty raw -echo; exec cat > '{}'",
        record.display()
    ));
    server.wait_for(&pane, "#{pane_current_command}", "cat");
    let mut rig = Rig::new(MuxConfig {
        submit_delay: Duration::from_millis(100),
        ..server.config()
    })?;
    wakedir::set_entry(
        &rig.wake_dir,
        SID,
        &PaneTarget::Tmux {
            pane: pane.clone(),
            session: None,
        },
    )?;
    let transcript = rig.transcript();
    append(&transcript, &assistant(100_000))?;
    rig.start()?;

    wait_until("state file at 50%", || {
        read_state(&rig.state_dir, SID).map(|(p, _)| p) == Some(50)
    })
    .await?;
    assert_eq!(recorded(&record), "", "nothing typed below 75 %");

    append(&transcript, &assistant(152_000))?;
    wait_until("wrap-up typed", || recorded(&record) == wrap_up(76)).await?;

    append(&transcript, &assistant(160_000))?;
    tokio::time::sleep(QUIET).await;
    assert_eq!(
        recorded(&record),
        wrap_up(76),
        "staying above 75 % repeats nothing"
    );

    append(&transcript, &assistant(172_000))?;
    let both = wrap_up(76) + &checkpoint(86);
    wait_until("checkpoint typed", || recorded(&record) == both).await?;
    // A human is told at the checkpoint (only there: the wrap-up before it told nobody).
    let mut told = Vec::new();
    wait_until("the checkpoint notice", || {
        while let Ok(notice) = rig.notices.try_recv() {
            told.push(notice);
        }
        !told.is_empty()
    })
    .await?;
    assert_eq!(
        told.iter().map(|n| n.kind).collect::<Vec<_>>(),
        [NoticeKind::Checkpoint]
    );
    assert_eq!(told[0].session_id, SID);

    // A compaction re-arms both levels; the next crossing comes while a turn runs.
    wakedir::set_busy(&rig.wake_dir, SID)?;
    append(&transcript, &compact_boundary(20_000))?;
    wait_until("compaction seen", || {
        rig.context()["percent"].as_f64() == Some(10.0)
    })
    .await?;
    append(&transcript, &assistant(154_000))?;
    wait_until("wrap-up due again", || {
        rig.context()["pending_warning"] == "wrap-up"
    })
    .await?;
    tokio::time::sleep(QUIET).await;
    assert_eq!(recorded(&record), both, "nothing typed over a running turn");

    wakedir::clear_busy(&rig.wake_dir, SID)?;
    let all = both.clone() + &wrap_up(77);
    wait_until("deferred wrap-up typed once idle", || {
        recorded(&record) == all
    })
    .await?;

    let store = rig.store.clone();
    // The warning waited for the idle moment without a try the gate had to refuse.
    wait_until("ledger rows", || {
        let c = common::delivery_counts(&store);
        c.get("tmux") == Some(&3) && c.len() == 1
    })
    .await?;
    // The view is published once the tick that told it is over.
    wait_until("the view", || {
        let ctx = rig.context();
        ctx["last_warning"] == "wrap-up" && ctx["pending_warning"].is_null()
    })
    .await?;
    rig.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fresh_statusline_feed_overrides_transcript_and_state_files_follow() -> TestResult {
    let mut rig = Rig::new(MuxConfig::default())?;
    // Reported by the hook at a path outside the config dirs: only the ledger can name it.
    let transcript = rig
        .root
        .path()
        .join("elsewhere")
        .join(format!("{SID}.jsonl"));
    std::fs::create_dir_all(transcript.parent().ok_or("no parent")?)?;
    append(&transcript, &assistant(100_000))?;
    // Its last turn ended ten minutes ago: the state file says when the figure was read.
    let read_at = clock::now_s() - 600;
    std::fs::File::options()
        .append(true)
        .open(&transcript)?
        .set_modified(clock::from_s(read_at))?;
    let store = rig.store.clone();
    store
        .record(Record::SessionSeen(SessionSeen {
            session_id: SID.into(),
            cwd: Some("/work/proj".into()),
            transcript_path: Some(transcript.display().to_string()),
            pane: None,
            last_hook_event: Some("Stop".into()),
            seen_at_ms: clock::now_ms(),
            kept: false,
            agent: Default::default(),
        }))
        .await?;
    rig.start()?;

    wait_until("transcript figure", || {
        rig.context()["percent"].as_f64() == Some(50.0)
    })
    .await?;
    let ctx = rig.context();
    assert_eq!(ctx["usage_source"], "assistant");
    assert_eq!(ctx["source"], "model-table");
    assert_eq!(ctx["used_tokens"].as_u64(), Some(100_000));
    assert_eq!(ctx["model"], MODEL);
    let (pct, ts) = read_state(&rig.state_dir, SID).ok_or("no state file")?;
    assert_eq!(pct, 50);
    assert_eq!(ts, read_at, "TIMESTAMP is the transcript's last change");
    let latest = std::fs::read_to_string(rig.latest_file())?;
    assert!(latest.starts_with("PCT=50\nTIMESTAMP="), "{latest:?}");

    let mut feed = Feed {
        session_id: SID.into(),
        model_id: Some("claude-opus-5-5".into()),
        used_percentage: Some(42.0),
        current_usage: Some(FeedUsage {
            input_tokens: 20_000,
            cache_read_input_tokens: 400_000,
            ..FeedUsage::default()
        }),
        context_window_size: Some(1_000_000),
        exceeds_200k_tokens: Some(true),
        transcript_path: None,
        timestamp: clock::now_s(),
        limit: None,
        budget: None,
    };
    write_feed(&rig.state_dir, &feed)?;
    wait_until("feed figure", || {
        rig.context()["percent"].as_f64() == Some(42.0)
    })
    .await?;
    let ctx = rig.context();
    assert_eq!(ctx["usage_source"], "statusline");
    assert_eq!(ctx["source"], "statusline");
    assert_eq!(ctx["context_window"].as_u64(), Some(1_000_000));
    wait_until("state file follows the feed", || {
        read_state(&rig.state_dir, SID).map(|(p, _)| p) == Some(42)
    })
    .await?;

    feed.timestamp = clock::now_s() - 3600;
    write_feed(&rig.state_dir, &feed)?;
    wait_until("stale feed ignored", || {
        rig.context()["percent"].as_f64() == Some(50.0)
    })
    .await?;
    rig.stop().await;
    Ok(())
}

/// A transcript's API-error record of a usage limit, written at `at` (RFC 3339).
fn limit_record(at: &str, resets: &str) -> String {
    format!(
        r#"{{"isSidechain":false,"type":"assistant","isApiErrorMessage":true,"apiErrorStatus":429,"error":"rate_limit","timestamp":"{at}","message":{{"model":"<synthetic>","role":"assistant","content":[{{"type":"text","text":"You've hit your session limit · resets {resets}"}}]}}}}"#
    ) + "\n"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_the_transcript_ends_on_is_recorded_once_and_an_old_one_is_not() -> TestResult {
    let mut rig = Rig::new(MuxConfig::default())?;
    // Yesterday's limit, long reset: history, not a limit.
    append(&rig.transcript(), &assistant(100_000))?;
    append(
        &rig.transcript(),
        &limit_record("2026-01-01T10:00:00Z", "in 5h"),
    )?;
    let store = rig.store.clone();
    store
        .record(Record::SessionSeen(SessionSeen {
            session_id: SID.into(),
            cwd: Some("/work/proj".into()),
            transcript_path: Some(rig.transcript().display().to_string()),
            pane: None,
            last_hook_event: Some("StopFailure".into()),
            seen_at_ms: clock::now_ms(),
            kept: false,
            agent: Default::default(),
        }))
        .await?;
    rig.start()?;
    wait_until("the transcript read", || {
        rig.context()["used_tokens"].as_u64() == Some(100_000)
    })
    .await?;
    tokio::time::sleep(QUIET).await;
    assert_eq!(store.limit(SID)?, None, "a reset long past is history");

    // A limit written now, with its reset two hours after the record's own time.
    let now = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
    append(&rig.transcript(), &limit_record(&now, "in 2h"))?;
    wait_until("the limit in the ledger", || {
        store.limit(SID).ok().flatten().is_some()
    })
    .await?;
    let limit = store.limit(SID)?.ok_or("no limit")?;
    assert_eq!(limit.how, LimitSource::Transcript);
    // "in 2h" is to the minute: the limit lifts by the end of that minute.
    let left = limit.resets_at_ms.ok_or("no reset")? - clock::now_ms();
    assert!((7_100_000..=7_260_000).contains(&left), "{left} ms left");
    rig.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transcript_change_is_picked_up_before_the_next_poll() -> TestResult {
    let slow_poll = Duration::from_secs(30);
    let mut rig = Rig::new(MuxConfig::default())?;
    let transcript = rig.transcript();
    append(&transcript, &assistant(20_000))?;
    wakedir::set_entry(
        &rig.wake_dir,
        SID,
        &PaneTarget::Tmux {
            pane: "%99".into(),
            session: None,
        },
    )?;
    rig.start_polling_every(slow_poll)?;
    wait_until("first pass", || {
        rig.context()["percent"].as_f64() == Some(10.0)
    })
    .await?;
    // Let the monitor register its watch on the transcript's directory.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let appended = std::time::Instant::now();
    append(&transcript, &assistant(60_000))?;
    wait_until("notified pass", || {
        rig.context()["percent"].as_f64() == Some(30.0)
    })
    .await?;
    assert!(
        appended.elapsed() < slow_poll / 4,
        "{:?}",
        appended.elapsed()
    );
    rig.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_reports_context_in_sessions_and_metrics() -> TestResult {
    let root = common::tempdir();
    std::fs::create_dir_all(root.path().join("run"))?;
    let claude = root.path().join("claude");
    let project = claude.join("projects").join("-work-proj");
    std::fs::create_dir_all(&project)?;
    append(&project.join(format!("{SID}.jsonl")), &assistant(130_000))?;
    let claude_s = claude.display().to_string();
    let env = Env::from(test_env(
        root.path(),
        &[
            ("AGENT_EVENT_BUS_BRIDGE_BACKEND", "spool"),
            ("CLAUDE_CONFIG_DIR", &claude_s),
            ("WAKEBRIDGE_CONTEXT__POLL_INTERVAL", "100ms"),
        ],
    ));
    let mut config = config::resolve(
        &Flags {
            port: Some("8082".into()),
            ..Flags::default()
        },
        &env,
    )?;
    config.port = 0;
    wakedir::set_entry(
        &config.paths.wake_dir,
        SID,
        &PaneTarget::Tmux {
            pane: "%99".into(),
            session: None,
        },
    )?;
    let app = App::build(wakebridge::app::Validated::new(config)?, &env).await?;
    let addr = app.local_addr();
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let served = tokio::spawn(app.run(shutdown.clone()));
    let client = reqwest::Client::new();

    let session = common::eventually_ok("context in /sessions", WAIT, async || {
        let body: serde_json::Value = client
            .get(format!("http://{addr}/sessions"))
            .send()
            .await
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())?;
        body["sessions"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["session_id"] == SID).cloned())
            .filter(|s| s["context"]["percent"].is_number())
            .ok_or(body)
    })
    .await;
    assert_eq!(session["context"]["percent"].as_f64(), Some(65.0));
    assert_eq!(session["context"]["used_tokens"].as_u64(), Some(130_000));
    assert_eq!(session["context"]["context_window"].as_u64(), Some(200_000));
    let metrics = client
        .get(format!("http://{addr}/metrics"))
        .send()
        .await?
        .text()
        .await?;
    assert!(
        metrics
            .lines()
            .any(|l| l == "wakebridge_context_percent_max 65"),
        "{metrics}"
    );
    assert!(
        metrics
            .lines()
            .any(|l| l == "wakebridge_context_sessions{level=\"below\"} 1"),
        "{metrics}"
    );
    let state = root.path().join("state").join("wakebridge");
    assert_eq!(read_state(&state, SID).map(|(p, _)| p), Some(65));

    shutdown.cancel();
    tokio::time::timeout(WAIT, served).await???;
    Ok(())
}

/// The state file's `(PCT, TIMESTAMP)`, read as a shell prompt or status bar reads it.
fn read_state(state_dir: &Path, sid: &str) -> Option<(u32, u64)> {
    let text = std::fs::read_to_string(state_path(state_dir, sid).ok()?).ok()?;
    let (pct, ts) = text.strip_prefix("PCT=")?.split_once("\nTIMESTAMP=")?;
    Some((pct.parse().ok()?, ts.trim_end().parse().ok()?))
}
