//! The idle nudger end to end: the loop on tokio's paused clock with scripted signals (exact
//! backoff arithmetic), and the real thing against a private tmux server running a scripted
//! stand-in for the Claude Code TUI (`tests/it/common/fake_agent.py`), the real gate, injector
//! and SQLite ledger.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use wakebridge::agent::Agent as AgentKind;
use wakebridge::api::Action;
use wakebridge::api::{SessionState, TextKind};
use wakebridge::budget::caused::Texts;
use wakebridge::budget::policy;
use wakebridge::budget::{Account, Window};
use wakebridge::context::followed::Followed;
use wakebridge::mux::{InjectError, Injector, KeystrokeText, MuxConfig, MuxError, PaneInfo};
use wakebridge::reading::inbox::Inbox;
use wakebridge::reading::registry::RegistryReading;
use wakebridge::reading::transcript::Turn;
use wakebridge::rewind::restart::{Restart, RestartSettings};
use wakebridge::session::gate::{Gate, GateOutcome, Mode};
use wakebridge::session::observe::FileStamp;
use wakebridge::session::task::{
    Keeper, Ledger, LiveIo, OWED_SENDER, SessionFacts, SessionIo, run,
};
use wakebridge::session::{Schedule, SessionConfig, SessionViews, Sessions};
use wakebridge::store::{
    Limit, LimitSource, NudgeState, Owed, Pause, Payment, Record, RewindRow, RewindWhy, SessionRow,
    Store,
};
use wakebridge::telemetry::notice::{Notice, NoticeKind};
use wakebridge::wakedir::target::PaneTarget;

use crate::common;
use crate::common::agent::Agent;
use crate::common::tmux::{TmuxServer, count_lines};

// ---------------------------------------------------------------------------------------------
// Paused clock, scripted signals.

/// The scripted world: one tmux pane per session whose title, activity and hooks the test sets.
#[derive(Default)]
struct World {
    panes: HashMap<String, PaneInfo>,
    mapping: BTreeMap<String, PaneTarget>,
    /// Sessions with no pane that their live inbox reaches.
    inbox_only: Vec<String>,
    facts: HashMap<String, SessionFacts>,
    busy: HashMap<String, bool>,
    /// (session, seconds since start, text) of every nudge typed.
    wakes: Vec<(String, u64, String)>,
    records: Vec<Record>,
    snapshots: u32,
    captures: u32,
    /// Screens read through the gate (any multiplexer).
    screen_reads: u32,
    /// The ledger cannot be read.
    ledger_down: bool,
    /// Polls begun (panes.json read).
    polls: u32,
    /// A session whose Stop hook pays its debt right after the next ledger read.
    hook_pays_after_read: Option<String>,
    /// Sessions whose wakes the gate refuses with this action (nothing typed).
    refuse: HashMap<String, Action>,
    /// Sessions whose refused wakes left their text on the prompt (`unsubmitted`).
    left_unsubmitted: HashSet<String>,
    /// What a session's screen shows (the idle prompt when not set).
    screens: HashMap<String, String>,
    /// Sessions whose limit menu was dismissed, in order.
    menu_picks: Vec<String>,
    /// Restarts started, in order.
    restarts: Vec<Restart>,
    /// Notices for a human, in order.
    notices: Vec<Notice>,
    /// The accounts' usage windows.
    budgets: Vec<Account>,
    /// The newest turn of each transcript.
    turns: HashMap<PathBuf, Turn>,
    /// When each session last got a budget nudge, as the ledger says at start.
    budget_nudged: HashMap<String, i64>,
}

/// The idle prompt, as the fake's capture shows it.
const IDLE_SCREEN: &str = "done\n\n────────────\n❯ \n────────────\n";

#[derive(Clone)]
struct FakeIo {
    world: Arc<Mutex<World>>,
    start: Instant,
}

const START_MS: i64 = 1_800_000_000_000;

impl FakeIo {
    fn new() -> Self {
        common::timeout::arm_test_timeout();
        Self {
            world: Arc::new(Mutex::new(World::default())),
            start: Instant::now(),
        }
    }

    fn add_session(&self, sid: &str, title: &str) {
        let mut w = self.world.lock().unwrap();
        let pane = format!("%{}", w.panes.len());
        w.panes.insert(
            pane.clone(),
            PaneInfo {
                pane_id: pane.clone(),
                dead: false,
                current_command: "claude".into(),
                pid: Some(1),
                window_activity: Some(1_000),
                title: title.into(),
            },
        );
        w.mapping.insert(
            sid.into(),
            PaneTarget::Tmux {
                pane,
                session: None,
            },
        );
    }

    /// A session with no pane that its inbox reaches, its last hook a turn's end at the start.
    fn add_inbox_session(&self, sid: &str) {
        let mut w = self.world.lock().unwrap();
        w.inbox_only.push(sid.into());
        heard(w.facts.entry(sid.into()).or_default(), "Stop", START_MS);
    }

    /// `sid` is owed a wake for one event since the start.
    fn owe_one(&self, sid: &str) {
        let mut w = self.world.lock().unwrap();
        w.facts.entry(sid.into()).or_default().row.owed = Some(Owed {
            events: 1,
            since_ms: START_MS,
        });
    }

    /// The session's window shows output now.
    fn touch(&self, sid: &str) {
        let now_s = u64::try_from(self.now_ms() / 1000).unwrap();
        let mut w = self.world.lock().unwrap();
        let pane = w.mapping[sid].pane().to_owned();
        w.panes.get_mut(&pane).unwrap().window_activity = Some(now_s);
    }

    fn wake_times(&self, sid: &str) -> Vec<u64> {
        let w = self.world.lock().unwrap();
        w.wakes
            .iter()
            .filter(|(s, _, _)| s == sid)
            .map(|(_, at, _)| *at)
            .collect()
    }
}

impl SessionIo for FakeIo {
    async fn mapping(&self) -> BTreeMap<String, PaneTarget> {
        let mut w = self.world.lock().unwrap();
        w.polls += 1;
        w.mapping.clone()
    }
    async fn tmux_snapshot(&self) -> Result<HashMap<String, PaneInfo>, MuxError> {
        let mut w = self.world.lock().unwrap();
        w.snapshots += 1;
        Ok(w.panes.clone())
    }
    async fn capture(&self, pane: &str) -> Result<String, MuxError> {
        let mut w = self.world.lock().unwrap();
        w.captures += 1;
        let sid = w
            .mapping
            .iter()
            .find(|(_, t)| t.pane() == pane)
            .map(|(s, _)| s.clone());
        Ok(sid
            .and_then(|sid| w.screens.get(&sid).cloned())
            .unwrap_or_else(|| IDLE_SCREEN.into()))
    }
    async fn screen(&self, sid: &str) -> Option<String> {
        let mut w = self.world.lock().unwrap();
        w.screen_reads += 1;
        Some(
            w.screens
                .get(sid)
                .cloned()
                .unwrap_or_else(|| IDLE_SCREEN.into()),
        )
    }
    async fn restart(&self, restart: Restart) {
        self.world.lock().unwrap().restarts.push(restart);
    }
    async fn dismiss_limit_menu(&self, sid: &str) -> Result<bool, InjectError> {
        let mut w = self.world.lock().unwrap();
        w.menu_picks.push(sid.into());
        // The menu goes; the notice stays the screen's latest word.
        if let Some(screen) = w.screens.get_mut(sid) {
            *screen = screen
                .lines()
                .filter(|l| !l.contains(". Stop and wait") && !l.contains(". Upgrade"))
                .map(|l| format!("{l}\n"))
                .collect();
        }
        Ok(true)
    }
    async fn ledger(
        &self,
        _only: Option<Vec<String>>,
        _registry: &HashMap<String, RegistryReading>,
    ) -> Option<Ledger> {
        let mut w = self.world.lock().unwrap();
        if w.ledger_down {
            return None;
        }
        let mut sessions: BTreeMap<String, SessionFacts> = w
            .facts
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for sid in &w.inbox_only {
            let facts = sessions.entry(sid.clone()).or_default();
            facts.inbox = Ok(Some(Inbox {
                socket: format!("/run/cc-socks/{sid}.sock").into(),
                token: None,
                pid: None,
                thread: None,
            }));
            facts.row.told_ms = Some(START_MS);
        }
        for (sid, facts) in &mut sessions {
            facts.row.session_id.clone_from(sid);
        }
        if let Some(sid) = w.hook_pays_after_read.take() {
            w.facts.get_mut(&sid).unwrap().row.owed = None;
        }
        Some(Ledger {
            sessions,
            ..Ledger::default()
        })
    }
    async fn claim_owed(&self, sid: &str) -> Option<u32> {
        let w = self.world.lock().unwrap();
        let owed = w.facts.get(sid).and_then(|f| f.row.owed);
        (!w.ledger_down).then(|| owed.map_or(0, |o| o.events))
    }
    async fn registry(&self) -> HashMap<String, RegistryReading> {
        HashMap::new()
    }
    async fn budgets(&self) -> Vec<Account> {
        self.world.lock().unwrap().budgets.clone()
    }
    async fn budget_nudges(&self) -> Option<HashMap<String, i64>> {
        let w = self.world.lock().unwrap();
        (!w.ledger_down).then(|| w.budget_nudged.clone())
    }
    async fn last_turn(&self, _agent: AgentKind, path: PathBuf) -> Option<Turn> {
        self.world.lock().unwrap().turns.get(&path).cloned()
    }
    fn busy(&self, sid: &str) -> bool {
        self.world
            .lock()
            .unwrap()
            .busy
            .get(sid)
            .copied()
            .unwrap_or(false)
    }
    async fn wake(&self, sid: &str, text: &KeystrokeText, _mode: Mode) -> GateOutcome {
        let at = Instant::now();
        let mut w = self.world.lock().unwrap();
        let secs = (at - self.start).as_secs();
        w.wakes.push((sid.into(), secs, text.as_str().into()));
        if let Some(&action) = w.refuse.get(sid) {
            let left = w.left_unsubmitted.contains(sid);
            return GateOutcome {
                action,
                error_kind: left.then_some("unsubmitted"),
                inject_time: Duration::ZERO,
            };
        }
        // A resume is taken: the prompt echoes above a reply, the notice scrolls up.
        if text.resumes_a_limit() {
            let screen = format!("❯ {text}\n● Picking up where I left off\n{IDLE_SCREEN}");
            w.screens.insert(sid.into(), screen);
        }
        // Our own keystrokes echo into the window, as they do in a real pane.
        let Some(pane) = w.mapping.get(sid).map(|t| t.pane().to_owned()) else {
            return GateOutcome {
                action: Action::Inbox,
                error_kind: None,
                inject_time: Duration::from_millis(2),
            };
        };
        let now_s =
            u64::try_from((START_MS + (at - self.start).as_millis() as i64) / 1000).unwrap();
        w.panes.get_mut(&pane).unwrap().window_activity = Some(now_s);
        GateOutcome {
            action: Action::Tmux,
            error_kind: None,
            inject_time: Duration::from_millis(600),
        }
    }
    async fn record(&self, records: Vec<Record>) {
        let mut w = self.world.lock().unwrap();
        for record in &records {
            // What the ledger would now say about the session (store tests pin the SQL).
            match record {
                Record::Nudge(state) => {
                    let facts = w.facts.entry(state.session_id.clone()).or_default();
                    facts.row.nudge = Some(state.clone());
                }
                Record::Pay { session_id, .. } => {
                    if let Some(facts) = w.facts.get_mut(session_id) {
                        facts.row.owed = None;
                    }
                }
                Record::Limited(seen) => {
                    let facts = w.facts.entry(seen.session_id.clone()).or_default();
                    let kept = facts.row.limit.take();
                    let same_text = seen.resets_text.is_some()
                        && kept
                            .as_ref()
                            .is_some_and(|k| k.resets_text == seen.resets_text);
                    facts.row.limit = Some(Limit {
                        kind: seen.kind.clone(),
                        resets_text: seen.resets_text.clone(),
                        resets_at_ms: match (&kept, same_text) {
                            (Some(k), true) => k.resets_at_ms,
                            _ => seen.resets_at_ms,
                        },
                        how: seen.how,
                        since_ms: kept.as_ref().map_or(seen.at_ms, |k| k.since_ms),
                        tries: kept.as_ref().map_or(0, |k| k.tries),
                        last_try_ms: kept.as_ref().and_then(|k| k.last_try_ms),
                        gave_up: kept.as_ref().is_some_and(|k| k.gave_up),
                    });
                }
                Record::ResumeTried { session_id, at_ms } => {
                    if let Some(limit) = w
                        .facts
                        .get_mut(session_id)
                        .and_then(|f| f.row.limit.as_mut())
                    {
                        limit.tries += 1;
                        limit.last_try_ms = Some(*at_ms);
                    }
                }
                Record::ResumeGaveUp { session_id } => {
                    if let Some(limit) = w
                        .facts
                        .get_mut(session_id)
                        .and_then(|f| f.row.limit.as_mut())
                    {
                        limit.gave_up = true;
                    }
                }
                Record::LimitLifted { session_id } => {
                    if let Some(facts) = w.facts.get_mut(session_id) {
                        facts.row.limit = None;
                    }
                }
                _ => {}
            }
        }
        w.records.extend(records);
    }
    async fn follow(
        &self,
        sessions: Vec<(String, Followed)>,
        _full: bool,
    ) -> Vec<(String, Followed, Vec<Record>)> {
        sessions.into_iter().map(|(s, f)| (s, f, vec![])).collect()
    }
    async fn changed(&self) {
        std::future::pending::<()>().await;
    }
    fn version(&self) -> Option<wakebridge::session::task::Version> {
        None
    }
    fn now_ms(&self) -> i64 {
        START_MS + i64::try_from((Instant::now() - self.start).as_millis()).unwrap()
    }
    fn notify(&self, notice: Notice) {
        self.world.lock().unwrap().notices.push(notice);
    }
}

/// The hook's last report of `facts`' session: `event` at `at_ms`.
fn heard(facts: &mut SessionFacts, event: &str, at_ms: i64) {
    facts.row.last_hook_event = Some(event.into());
    facts.row.last_seen_ms = Some(at_ms);
}

/// A person's pause since the start, until unpaused.
fn paused() -> Pause {
    Pause {
        since_ms: START_MS,
        until_ms: None,
        all: false,
    }
}

/// The nudge figures of a session's view.
trait NudgeView {
    fn nudge_view(&self) -> wakebridge::api::Nudge;
    fn acknowledged(&self) -> bool {
        self.nudge_view().acknowledged
    }
    fn unanswered(&self) -> u32 {
        self.nudge_view().unanswered
    }
    fn next_nudge_at(&self) -> Option<jiff::Timestamp> {
        self.nudge_view().next_nudge_at
    }
}

impl NudgeView for wakebridge::api::SessionStatus {
    fn nudge_view(&self) -> wakebridge::api::Nudge {
        self.nudge.clone().expect("a nudge view")
    }
}

/// The kinds of the notices told about `sid`, in order.
fn notices(io: &FakeIo, sid: &str) -> Vec<NoticeKind> {
    let w = io.world.lock().unwrap();
    w.notices
        .iter()
        .filter(|n| n.session_id == sid)
        .map(|n| n.kind)
        .collect()
}

fn default_config() -> SessionConfig {
    SessionConfig {
        enabled: true,
        idle_after: Duration::from_secs(300),
        poll_interval: Duration::from_secs(10),
        schedule: Schedule {
            base: Duration::from_secs(90),
            max: Duration::from_secs(900),
            acknowledge_after: 5,
        },
        messages: vec![
            KeystrokeText::new("Please continue.").unwrap(),
            KeystrokeText::new("Anything left?").unwrap(),
        ],
        echo_grace: Duration::from_secs(10),
        owed_after: Duration::from_secs(10),
        ..shipped()
    }
}

/// The shipped settings as `serve` validates them (its budget and texts too): `[limits]` resumes
/// at the reset + 60 s with `continue`, 3 tries.
fn shipped() -> SessionConfig {
    let d = wakebridge::config::defaults();
    SessionConfig {
        budget: policy::validate(&d.budget).unwrap(),
        texts: Texts::new(d),
        ..SessionConfig::from_settings(d, std::path::PathBuf::new(), vec![], true).unwrap()
    }
}

/// How the live loops here would restart an agent (none of their tests asks for one).
fn restart_settings() -> RestartSettings {
    RestartSettings {
        command: vec!["claude".into()],
        timeout: Duration::from_secs(90),
        claude_home: None,
        mux: MuxConfig::default(),
    }
}

/// The rows of owed wakes the loop recorded for `sid`, by action.
fn owed_rows(io: &FakeIo, sid: &str) -> Vec<String> {
    io.world
        .lock()
        .unwrap()
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Delivery(d) if d.target_session == sid && d.sender == OWED_SENDER => {
                Some(d.action.clone())
            }
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn paused_clock_owed_wake_waits_out_a_refusal_with_one_row_then_is_typed_and_paid_once() {
    let io = FakeIo::new();
    io.add_session("s1", "\u{2733} Claude Code");
    {
        let mut w = io.world.lock().unwrap();
        let owed = Owed {
            events: 2,
            since_ms: START_MS,
        };
        w.facts.insert(
            "s1".into(),
            SessionFacts {
                row: SessionRow {
                    owed: Some(owed),
                    ..SessionRow::default()
                },
                ..SessionFacts::default()
            },
        );
        // A draft at the prompt, say: the gate refuses every attempt.
        w.refuse.insert("s1".into(), Action::SpoolBusy);
    }
    let (shutdown, _views) = spawn_loop(default_config(), io.clone());
    tokio::time::sleep(Duration::from_secs(60)).await;
    let attempts = io.wake_times("s1");
    // Quiet for owed_after (10 s), then a try every 2 s (the 1 s polls while owed).
    assert!(attempts.first().is_some_and(|&t| t >= 10), "{attempts:?}");
    assert!(attempts.len() >= 15, "{attempts:?}");
    assert_eq!(
        owed_rows(&io, "s1"),
        ["spool-busy"],
        "one row for the streak"
    );
    // Each refusal typed nothing, so it gave the claim back for the Stop hook to pay.
    assert_eq!(unclaims(&io, "s1"), io.wake_times("s1").len());

    io.world.lock().unwrap().refuse.clear();
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(owed_rows(&io, "s1"), ["spool-busy", "tmux"]);
    let pays = io
        .world
        .lock()
        .unwrap()
        .records
        .iter()
        .filter(|r| {
            matches!(
                r,
                Record::Pay {
                    how: Payment::Typed,
                    ..
                }
            )
        })
        .count();
    assert_eq!(pays, 1, "paid once");
    // Typed once, then nothing more: nothing is owed any longer.
    let tries = io.wake_times("s1").len();
    assert_eq!(tries, attempts.len() + 1);
    assert_eq!(
        unclaims(&io, "s1"),
        tries - 1,
        "the wake typed kept its claim till paid"
    );
    shutdown.cancel();
}

/// How many times the loop gave back its claim on `sid`'s debt.
fn unclaims(io: &FakeIo, sid: &str) -> usize {
    let w = io.world.lock().unwrap();
    (w.records.iter())
        .filter(|r| matches!(r, Record::Unclaim { session_id } if session_id == sid))
        .count()
}

/// An owed wake that left its text on the prompt keeps the claim through the refusals after it:
/// the Stop hook that would run once that text is taken must not tell the debt a second time.
#[tokio::test(start_paused = true)]
async fn paused_clock_text_left_on_the_prompt_keeps_the_claim_until_a_wake_is_typed() {
    let io = FakeIo::new();
    io.add_session("s1", "\u{2733} Claude Code");
    io.owe_one("s1");
    {
        let mut w = io.world.lock().unwrap();
        w.refuse.insert("s1".into(), Action::SpoolMuxFailed);
        w.left_unsubmitted.insert("s1".into());
    }
    let (shutdown, _views) = spawn_loop(default_config(), io.clone());
    let first_try = || !io.wake_times("s1").is_empty();
    while !first_try() {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    {
        let mut w = io.world.lock().unwrap();
        w.left_unsubmitted.clear();
        w.refuse.insert("s1".into(), Action::SpoolBusy);
    }
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(io.wake_times("s1").len() >= 5, "{:?}", io.wake_times("s1"));
    assert_eq!(unclaims(&io, "s1"), 0);

    // A wake typed ends it; the next debt's refusals give the claim back again.
    io.world.lock().unwrap().refuse.clear();
    tokio::time::sleep(Duration::from_secs(5)).await;
    io.owe_one("s1");
    io.world
        .lock()
        .unwrap()
        .refuse
        .insert("s1".into(), Action::SpoolBusy);
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(unclaims(&io, "s1") > 0);
    shutdown.cancel();
}

fn spawn_loop(
    config: SessionConfig,
    io: FakeIo,
) -> (CancellationToken, watch::Receiver<SessionViews>) {
    let (tx, rx) = watch::channel(SessionViews::default());
    let nudger = Keeper::new(config, io, Arc::default(), tx);
    let shutdown = CancellationToken::new();
    tokio::spawn(run(nudger, shutdown.clone()));
    (shutdown, rx)
}

/// A session's screen with a limit notice as its latest word (and the limit menu, if `menu`).
fn limit_screen(resets: &str, menu: bool) -> String {
    let menu = if menu {
        "What do you want to do?\n❯ 1. Stop and wait for limit to reset\n  2. Upgrade your plan\n"
    } else {
        ""
    };
    format!(
        "● Working on the parser\n  ⎿  You've hit your session limit · resets {resets}\n{menu}\n\
         ────────────\n❯ \n────────────\n"
    )
}

/// `sid` held at its session limit, seen by the hook at the start, resetting in `minutes`.
fn limited(io: &FakeIo, sid: &str, minutes: i64, menu: bool) {
    let resets = format!("in {minutes}m");
    let mut w = io.world.lock().unwrap();
    w.screens.insert(sid.into(), limit_screen(&resets, menu));
    w.facts.entry(sid.into()).or_default().row.limit = Some(Limit {
        kind: "session limit".into(),
        resets_text: Some(resets),
        resets_at_ms: Some(START_MS + minutes * 60_000),
        how: LimitSource::Hook,
        since_ms: START_MS,
        tries: 0,
        last_try_ms: None,
        gave_up: false,
    });
}

/// (seconds since start, text) of everything typed into `sid`.
fn typed_texts(io: &FakeIo, sid: &str) -> Vec<(u64, String)> {
    let w = io.world.lock().unwrap();
    w.wakes
        .iter()
        .filter(|(s, _, _)| s == sid)
        .map(|(_, at, text)| (*at, text.clone()))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn paused_clock_a_limited_session_is_held_resumed_at_each_reset_then_given_up_on() {
    let io = FakeIo::new();
    io.add_session("s1", "\u{2733} Claude Code");
    limited(&io, "s1", 10, true);
    let (shutdown, views) = spawn_loop(default_config(), io.clone());

    // Idle for far longer than idle_after (5 min): held, so nothing typed until reset + 60 s.
    tokio::time::sleep(Duration::from_secs(10 * 60 + 59)).await;
    assert_eq!(typed_texts(&io, "s1"), []);
    let view = views.borrow()["s1"].clone();
    assert!(
        view.reason
            .starts_with("limited (session limit) · reset passed"),
        "{view:?}"
    );
    assert_eq!(
        view.unanswered(),
        0,
        "the backoff does not advance while held"
    );

    // The reset: the menu is dismissed by its wait option, then `continue` typed, once.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(typed_texts(&io, "s1"), [(660, "continue".to_string())]);
    assert_eq!(io.world.lock().unwrap().menu_picks, ["s1"]);

    // It met the limit again and shows the next reset, read after the 30 s settle (t = 690):
    // waited for, then resumed again at 690 + 20 min (to the end of that minute) + 60 s.
    set_screen(&io, "s1", &limit_screen("in 20m", false));
    tokio::time::sleep(Duration::from_secs(2000 - 662)).await;
    assert_eq!(typed_texts(&io, "s1").len(), 1);
    tokio::time::sleep(Duration::from_secs(30)).await;
    let texts = typed_texts(&io, "s1");
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!((2000..=2020).contains(&texts[1].0), "{texts:?}");

    // Again: the third and last try, then once more at the limit, and it gives up.
    // Set before the settle look 30 s after it: the third try met the limit again too.
    set_screen(&io, "s1", &limit_screen("in 5m", false));
    tokio::time::sleep(Duration::from_secs(2480 - 2030)).await;
    let texts = typed_texts(&io, "s1");
    assert_eq!(texts.len(), 3, "{texts:?}");
    set_screen(&io, "s1", &limit_screen("in 7m", false));
    tokio::time::sleep(Duration::from_secs(3 * 3600)).await;
    let texts = typed_texts(&io, "s1");
    assert_eq!(texts.len(), 3, "three tries, then nothing: {texts:?}");
    assert!(texts.iter().all(|(_, t)| t == "continue"), "{texts:?}");
    let limit = io.world.lock().unwrap().facts["s1"]
        .row
        .limit
        .clone()
        .unwrap();
    assert!(limit.gave_up && limit.tries == 3, "{limit:?}");
    assert!(
        views.borrow()["s1"]
            .reason
            .contains("gave up after 3 resumes")
    );
    shutdown.cancel();
}

/// `screen` with Claude Code's own auto-continue footer under its input box (`shortly`: the
/// wording from the reset until it fires).
fn with_auto_continue(screen: &str, shortly: bool) -> String {
    let when = if shortly {
        "shortly"
    } else {
        "automatically at 3pm"
    };
    format!(
        "{screen}  ⚠ Usage limit reached · limit resets 3pm\n    Continuing {when} · Esc to cancel\n"
    )
}

/// Issue 28, part 3: a session whose own auto-continue is armed is left to it after the reset
/// (nothing typed at reset + grace); the hold lifts when it fires. One it left waiting ("shortly"
/// long past its 30–90 s) is resumed once `auto_continue_wait` after the reset, through the
/// footer's "Esc to cancel" (no dialog).
#[tokio::test(start_paused = true)]
async fn paused_clock_claude_codes_own_auto_continue_is_left_to_it_and_stepped_in_for_when_it_did_not()
 {
    let io = FakeIo::new();
    for sid in ["fires", "stuck"] {
        io.add_session(sid, "\u{2733} Claude Code");
        limited(&io, sid, 1, false);
        set_screen(
            &io,
            sid,
            &with_auto_continue(&limit_screen("in 1m", false), false),
        );
    }
    let (shutdown, views) = spawn_loop(default_config(), io.clone());
    // Past the reset (60 s) and the grace (60 s): armed, "shortly", left alone.
    tokio::time::sleep(Duration::from_secs(61)).await;
    for sid in ["fires", "stuck"] {
        set_screen(
            &io,
            sid,
            &with_auto_continue(&limit_screen("in 1m", false), true),
        );
    }
    tokio::time::sleep(Duration::from_secs(65)).await;
    assert_eq!(typed_texts(&io, "fires"), []);
    assert_eq!(typed_texts(&io, "stuck"), []);
    let view = views.borrow()["stuck"].clone();
    assert!(
        view.reason
            .ends_with("its own auto-continue goes first, watching"),
        "{view:?}"
    );
    // One fires (its hook lifts the hold); the other is still "shortly" at reset + 2 min.
    io.world
        .lock()
        .unwrap()
        .facts
        .get_mut("fires")
        .unwrap()
        .row
        .limit = None;
    tokio::time::sleep(Duration::from_secs(120 + 60 - 126 + 2)).await;
    assert_eq!(typed_texts(&io, "fires"), []);
    let stuck = typed_texts(&io, "stuck");
    assert_eq!(
        stuck.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>(),
        ["continue"],
        "{stuck:?}"
    );
    assert!((180..=182).contains(&stuck[0].0), "{stuck:?}");
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn paused_clock_a_resume_that_works_lifts_the_hold_and_one_that_meets_the_same_reset_waits() {
    let io = FakeIo::new();
    io.add_session("ok", "\u{2733} Claude Code");
    limited(&io, "ok", 1, false);
    io.add_session("same", "\u{2733} Claude Code");
    limited(&io, "same", 1, false);
    let (shutdown, _views) = spawn_loop(default_config(), io.clone());
    tokio::time::sleep(Duration::from_secs(125)).await;
    assert_eq!(typed_texts(&io, "ok").len(), 1);
    assert_eq!(typed_texts(&io, "same").len(), 1);
    // Told once when held (however many polls see it held), once when resumed.
    assert_eq!(
        notices(&io, "ok"),
        [NoticeKind::UsageLimit, NoticeKind::Resumed]
    );
    // `same` shows the very notice it showed before, as its latest word again: no new reset,
    // so the next try waits 5 min, not the 30 s settle.
    set_screen(&io, "same", &limit_screen("in 1m", false));
    tokio::time::sleep(Duration::from_secs(4 * 60)).await;
    assert!(
        io.world.lock().unwrap().facts["ok"].row.limit.is_none(),
        "lifted once working"
    );
    assert_eq!(typed_texts(&io, "same").len(), 1);
    tokio::time::sleep(Duration::from_secs(2 * 60)).await;
    let texts = typed_texts(&io, "same");
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!((420..=430).contains(&texts[1].0), "{texts:?}");
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn paused_clock_a_limit_without_a_reset_is_looked_at_each_minute_and_lifts_when_gone() {
    let io = FakeIo::new();
    io.add_session("spend", "\u{2733} Claude Code");
    limited(&io, "spend", 1, false);
    {
        let mut w = io.world.lock().unwrap();
        let limit = w
            .facts
            .get_mut("spend")
            .unwrap()
            .row
            .limit
            .as_mut()
            .unwrap();
        limit.resets_text = None;
        limit.resets_at_ms = None;
        limit.kind = "monthly spend limit".into();
        // Owed events of a held session do not make the loop poll every second.
        w.facts.get_mut("spend").unwrap().row.owed = Some(Owed {
            events: 1,
            since_ms: START_MS,
        });
    }
    let (shutdown, views) = spawn_loop(default_config(), io.clone());
    tokio::time::sleep(Duration::from_secs(10 * 60)).await;
    assert_eq!(typed_texts(&io, "spend"), []);
    assert!(
        views.borrow()["spend"]
            .reason
            .contains("reset time unknown")
    );
    let snapshots = io.world.lock().unwrap().snapshots;
    assert!(
        snapshots <= 61,
        "polled {snapshots} times in 10 min: not every second"
    );
    // Someone dealt with it by hand: within a minute the hold is gone.
    io.world.lock().unwrap().screens.remove("spend");
    tokio::time::sleep(Duration::from_secs(61)).await;
    assert!(io.world.lock().unwrap().facts["spend"].row.limit.is_none());
    shutdown.cancel();
}

fn set_screen(io: &FakeIo, sid: &str, screen: &str) {
    io.world
        .lock()
        .unwrap()
        .screens
        .insert(sid.into(), screen.into());
}

#[tokio::test(start_paused = true)]
async fn paused_clock_a_session_resumed_on_its_own_or_working_or_with_resume_off_gets_nothing() {
    let io = FakeIo::new();
    // Resumed by Claude Code's own auto-continue: the notice is no longer the latest word.
    io.add_session("auto", "\u{2733} Claude Code");
    limited(&io, "auto", 2, false);
    // Working at the reset (a busy marker): not typed into.
    io.add_session("busy", "\u{2733} Claude Code");
    limited(&io, "busy", 2, false);
    io.world.lock().unwrap().busy.insert("busy".into(), true);
    let (shutdown, views) = spawn_loop(default_config(), io.clone());
    tokio::time::sleep(Duration::from_secs(60)).await;
    io.world.lock().unwrap().screens.remove("auto");
    tokio::time::sleep(Duration::from_secs(3 * 60)).await;
    assert_eq!(typed_texts(&io, "auto"), []);
    assert_eq!(typed_texts(&io, "busy"), []);
    assert!(
        io.world.lock().unwrap().facts["auto"].row.limit.is_none(),
        "hold lifted"
    );
    assert!(
        views.borrow()["busy"].reason.contains("working again"),
        "{:?}",
        views.borrow()["busy"]
    );
    // Lifted, `auto` is an idle session like any other: the nudger takes it from here.
    tokio::time::sleep(Duration::from_secs(10 * 60)).await;
    assert!(
        typed_texts(&io, "auto")
            .iter()
            .all(|(_, t)| t != "continue"),
        "{:?}",
        typed_texts(&io, "auto")
    );
    assert!(!typed_texts(&io, "auto").is_empty(), "nudged once lifted");
    shutdown.cancel();

    // `resume = false`: held for good, never typed into.
    let io = FakeIo::new();
    io.add_session("s1", "\u{2733} Claude Code");
    limited(&io, "s1", 1, true);
    let mut config = default_config();
    config.limits.resume = false;
    let (shutdown, views) = spawn_loop(config, io.clone());
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(typed_texts(&io, "s1"), []);
    assert!(views.borrow()["s1"].reason.ends_with("resume off"));
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn paused_clock_idle_session_gets_doubling_gaps_then_falls_silent() {
    let io = FakeIo::new();
    io.add_session("s1", "\u{2733} Claude Code");
    let (shutdown, views) = spawn_loop(default_config(), io.clone());
    tokio::time::sleep(Duration::from_secs(3 * 3600)).await;
    let times = io.wake_times("s1");
    // First nudge after 5 min of quiet (polls every 10 s), then 90, 180, 360, 720 s apart.
    assert_eq!(times.first(), Some(&300), "{times:?}");
    let gaps: Vec<u64> = times.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(gaps, [90, 180, 360, 720], "{times:?}");
    let view = views.borrow()["s1"].clone();
    assert!(view.acknowledged() && view.unanswered() == 5, "{view:?}");
    assert_eq!(view.next_nudge_at(), None);
    assert_eq!(notices(&io, "s1"), [NoticeKind::AcknowledgedIdle]);
    let texts: Vec<String> = io
        .world
        .lock()
        .unwrap()
        .wakes
        .iter()
        .map(|w| w.2.clone())
        .collect();
    assert_eq!(
        texts[..3],
        ["Please continue.", "Anything left?", "Please continue."]
    );
    // Every nudge is in the ledger: one delivery and one state per nudge.
    let records = io.world.lock().unwrap().records.clone();
    let deliveries = records
        .iter()
        .filter(|r| matches!(r, Record::Delivery(_)))
        .count();
    assert_eq!(deliveries, 5);
    assert!(matches!(
        records.last(),
        Some(Record::Nudge(NudgeState {
            unanswered: 5,
            acknowledged: true,
            ..
        }))
    ));
    shutdown.cancel();
}

/// One account's 5-hour window, `used` % used, resetting `resets_in` after the start: the
/// account of every session added so far.
fn five_hour(io: &FakeIo, used: f64, resets_in: Duration) {
    let resets_at_ms = START_MS + i64::try_from(resets_in.as_millis()).unwrap();
    let mut w = io.world.lock().unwrap();
    let sessions: Vec<String> = w.mapping.keys().cloned().collect();
    for sid in sessions {
        let transcript = format!("/home/u/.claude/projects/p/{sid}.jsonl");
        w.facts.entry(sid).or_default().row.transcript_path = Some(transcript);
    }
    w.budgets = vec![Account {
        account: "/home/u/.claude".into(),
        five_hour: Some(Window {
            used_percentage: used,
            resets_at_ms: Some(resets_at_ms),
            seen_ms: START_MS,
        }),
        seven_day: None,
    }];
}

fn budget_nudges(io: &FakeIo, sid: &str) -> Vec<(u64, String)> {
    let w = io.world.lock().unwrap();
    w.wakes
        .iter()
        .filter(|(s, _, text)| s == sid && text.starts_with("Usage budget"))
        .map(|(_, at, text)| (*at, text.clone()))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn paused_clock_an_under_used_window_near_its_end_gets_one_budget_nudge_even_when_acknowledged()
 {
    let io = FakeIo::new();
    io.add_session("s1", "\u{2733} Claude Code");
    io.add_session("asked", "\u{2733} Claude Code");
    io.add_session("paused", "\u{2733} Claude Code");
    io.world.lock().unwrap().screens.insert(
        "asked".into(),
        "● Should I also migrate the old table?\n\n────────────\n❯ \n────────────\n".into(),
    );
    io.world.lock().unwrap().facts.insert(
        "paused".into(),
        SessionFacts {
            pause: Some(paused()),
            ..SessionFacts::default()
        },
    );
    // 40 % used, resetting 3 h 30 m in: the window is "near its end" from 2 h 45 m.
    five_hour(&io, 40.0, Duration::from_secs(3 * 3600 + 1800));
    let (shutdown, views) = spawn_loop(default_config(), io.clone());
    tokio::time::sleep(Duration::from_secs(2 * 3600 + 2690)).await;
    assert_eq!(
        budget_nudges(&io, "s1"),
        [],
        "not before the last 45 minutes"
    );
    assert!(
        views.borrow()["s1"].acknowledged(),
        "{:?}",
        views.borrow()["s1"]
    );
    tokio::time::sleep(Duration::from_secs(30 * 60)).await;
    let told = budget_nudges(&io, "s1");
    assert_eq!(told.len(), 1, "once per window: {told:?}");
    let (at, text) = &told[0];
    assert!((2 * 3600 + 2700..=2 * 3600 + 2710).contains(at), "at {at}");
    assert!(
        text.contains("60% of the 5-hour window is still unused"),
        "{text}"
    );
    // The answer that never came does not un-acknowledge it; no nudge series starts again.
    assert_eq!(io.wake_times("s1").len(), 6, "{:?}", io.wake_times("s1"));
    // Waiting on a person's answer, or paused: nothing.
    assert_eq!(budget_nudges(&io, "asked"), []);
    assert!(views.borrow()["asked"].reason.contains("asked a question"));
    assert_eq!(io.wake_times("paused"), Vec::<u64>::new());
    shutdown.cancel();
}

/// The session's turn ended now, started by `prompt`, having called `tools` tools.
fn turn_ended(io: &FakeIo, sid: &str, prompt: &str, tools: u32) {
    let now_ms = io.now_ms();
    let mut w = io.world.lock().unwrap();
    let facts = w.facts.entry(sid.into()).or_default();
    let path = PathBuf::from(
        &*(facts.row.transcript_path).get_or_insert_with(|| format!("/t/{sid}.jsonl")),
    );
    w.turns.insert(
        path.clone(),
        Turn {
            prompt_id: format!("p-{now_ms}"),
            prompt: prompt.into(),
            tokens: 2_012,
            tools,
        },
    );
    let facts = w.facts.entry(sid.into()).or_default();
    heard(facts, "Stop", now_ms);
    facts.transcript = Some(FileStamp {
        size: 1,
        mtime_ms: now_ms,
    });
}

#[tokio::test(start_paused = true)]
async fn paused_clock_a_nudge_answered_by_a_turn_without_tools_stays_unanswered_and_is_charged() {
    let io = FakeIo::new();
    io.add_session("idle", "\u{2733} Claude Code");
    io.add_session("worker", "\u{2733} Claude Code");
    let (shutdown, views) = spawn_loop(default_config(), io.clone());
    tokio::time::sleep(Duration::from_secs(305)).await;
    assert_eq!(io.wake_times("idle"), [300]);
    // Both answer the nudge with output past the echo grace; one turn calls a tool.
    tokio::time::sleep(Duration::from_secs(15)).await;
    io.touch("idle");
    io.touch("worker");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        views.borrow()["idle"].unanswered(),
        0,
        "the answer seen first"
    );
    // Charged by the shipped texts (`texts` in the config).
    let nudge = &wakebridge::config::defaults().nudger.messages[0];
    turn_ended(&io, "idle", nudge, 0);
    turn_ended(&io, "worker", nudge, 1);
    // Charged at the first poll a second after the turn's end (polls every 10 s).
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(
        views.borrow()["idle"].unanswered(),
        1,
        "{:?}",
        views.borrow()["idle"]
    );
    assert_eq!(views.borrow()["worker"].unanswered(), 0);
    let charged: Vec<(String, TextKind, u64)> = io
        .world
        .lock()
        .unwrap()
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Caused(c) => Some((c.session_id.clone(), c.kind, c.tokens)),
            _ => None,
        })
        .collect();
    assert_eq!(
        charged,
        [
            ("idle".to_owned(), TextKind::Nudge, 2_012),
            ("worker".to_owned(), TextKind::Nudge, 2_012)
        ]
    );
    // A person's prompt is nobody's to charge.
    turn_ended(&io, "worker", "fix the build", 3);
    tokio::time::sleep(Duration::from_secs(12)).await;
    let records = io.world.lock().unwrap().records.clone();
    assert_eq!(
        records
            .iter()
            .filter(|r| matches!(r, Record::Caused(_)))
            .count(),
        2
    );
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn paused_clock_an_idle_answer_gives_back_only_the_series_its_own_text_started() {
    let io = FakeIo::new();
    io.add_session("s1", "\u{2733} Claude Code");
    // The window comes near its end at 2100 s.
    five_hour(&io, 40.0, Duration::from_secs(2100 + 45 * 60));
    let (shutdown, views) = spawn_loop(default_config(), io.clone());
    tokio::time::sleep(Duration::from_secs(2000)).await;
    assert!(
        views.borrow()["s1"].acknowledged(),
        "five nudges unanswered"
    );
    // A person comes back and works: a turn of theirs with tools.
    io.touch("s1");
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert!(!views.borrow()["s1"].acknowledged());
    turn_ended(&io, "s1", "refactor the parser", 4);
    // Quiet again for `idle_after`: the budget nudge; its turn answers in words only.
    tokio::time::sleep(Duration::from_secs(320)).await;
    let told = budget_nudges(&io, "s1");
    assert_eq!(told.len(), 1, "{told:?}");
    io.touch("s1");
    tokio::time::sleep(Duration::from_secs(10)).await;
    turn_ended(&io, "s1", &told[0].1, 0);
    tokio::time::sleep(Duration::from_secs(15)).await;
    // The person's return is not undone: the old series is not given back.
    let view = views.borrow()["s1"].clone();
    assert!(!view.acknowledged() && view.unanswered() == 0, "{view:?}");
    let charged = io
        .world
        .lock()
        .unwrap()
        .records
        .iter()
        .filter(|r| matches!(r, Record::Caused(c) if c.kind == TextKind::Budget))
        .count();
    assert_eq!(charged, 1);
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn paused_clock_a_budget_nudge_given_before_a_restart_is_not_given_again() {
    let io = FakeIo::new();
    io.add_session("given", "\u{2733} Claude Code");
    io.add_session("not-given", "\u{2733} Claude Code");
    // The window ends in 30 minutes; "given" had its budget nudge 5 minutes ago.
    five_hour(&io, 40.0, Duration::from_secs(30 * 60));
    io.world
        .lock()
        .unwrap()
        .budget_nudged
        .insert("given".into(), START_MS - 5 * 60_000);
    let (shutdown, _views) = spawn_loop(default_config(), io.clone());
    tokio::time::sleep(Duration::from_secs(20 * 60)).await;
    assert_eq!(budget_nudges(&io, "given"), []);
    assert_eq!(budget_nudges(&io, "not-given").len(), 1);
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn paused_clock_a_nearly_spent_window_stops_every_nudge_until_its_reset() {
    let io = FakeIo::new();
    io.add_session("s1", "\u{2733} Claude Code");
    five_hour(&io, 93.0, Duration::from_secs(2 * 3600));
    let (shutdown, views) = spawn_loop(default_config(), io.clone());
    tokio::time::sleep(Duration::from_secs(2 * 3600 - 60)).await;
    assert_eq!(io.wake_times("s1"), Vec::<u64>::new());
    let reason = views.borrow()["s1"].reason.clone();
    assert!(
        reason.contains("5-hour window 93% used, sparing it"),
        "{reason}"
    );
    // Past the reset the window says nothing more, and nudging comes back.
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(io.wake_times("s1").len(), 1, "{:?}", io.wake_times("s1"));
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn paused_clock_activity_resets_the_series_and_acknowledged_wakes_up() {
    let io = FakeIo::new();
    io.add_session("s1", "\u{2733} Claude Code");
    let (shutdown, views) = spawn_loop(default_config(), io.clone());
    // Three nudges: 300, 390, 570.
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(io.wake_times("s1"), [300, 390, 570]);
    assert_eq!(views.borrow()["s1"].unanswered(), 3);
    // The agent works (output well after the grace), then stops again.
    io.touch("s1");
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(
        views.borrow()["s1"].unanswered(),
        0,
        "activity answered the nudges"
    );
    tokio::time::sleep(Duration::from_secs(600)).await;
    let times = io.wake_times("s1");
    // The next nudge comes after a fresh 5 min of quiet, and the series restarts at base.
    assert_eq!(times[3], 900, "{times:?}");
    assert_eq!(times[4] - times[3], 90, "{times:?}");
    // Acknowledged sessions come back to life on activity.
    tokio::time::sleep(Duration::from_secs(3 * 3600)).await;
    assert!(views.borrow()["s1"].acknowledged());
    let before = io.wake_times("s1").len();
    io.touch("s1");
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert!(!views.borrow()["s1"].acknowledged());
    // One nudge after a fresh 5 min of quiet; the next would be 90 s later.
    tokio::time::sleep(Duration::from_secs(350)).await;
    assert_eq!(io.wake_times("s1").len(), before + 1);
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn paused_clock_busy_unknown_and_marked_sessions_are_never_nudged() {
    let io = FakeIo::new();
    io.add_session("busy-title", "\u{25d0} Claude Code");
    io.add_session("unknown-title", "Gi=31,s=1,v=1,a=q,t=d,f=24;AAAA");
    io.add_session("marker", "\u{2733} Claude Code");
    io.add_session("permission", "\u{2733} Claude Code");
    io.add_session("control", "\u{2733} Claude Code");
    {
        let mut w = io.world.lock().unwrap();
        w.busy.insert("marker".into(), true);
        w.facts.insert("permission".into(), {
            let mut facts = SessionFacts::default();
            heard(&mut facts, "Notification:permission_prompt", START_MS);
            facts
        });
    }
    let (shutdown, views) = spawn_loop(default_config(), io.clone());
    tokio::time::sleep(Duration::from_secs(3600)).await;
    for sid in ["busy-title", "unknown-title", "marker", "permission"] {
        assert!(io.wake_times(sid).is_empty(), "{sid} was nudged");
    }
    assert!(
        !io.wake_times("control").is_empty(),
        "the idle control session was not"
    );
    let v = views.borrow();
    assert!(
        v["busy-title"].state == SessionState::Working,
        "{:?}",
        v["busy-title"]
    );
    assert_eq!(v["unknown-title"].state, SessionState::Idle);
    assert!(v["unknown-title"].reason.starts_with("unknown"));
    assert_eq!(v["permission"].state, SessionState::Dialog);
    drop(v);
    // One snapshot per poll for all five sessions; captures only before the control's nudges.
    let control_nudges = io.wake_times("control").len();
    let w = io.world.lock().unwrap();
    assert!(
        (360..=361).contains(&w.snapshots),
        "one list-panes per 10 s poll over an hour: {}",
        w.snapshots
    );
    assert_eq!(w.captures as usize, control_nudges);
    drop(w);
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn paused_clock_restores_an_acknowledged_session_from_the_ledger() {
    let io = FakeIo::new();
    io.add_session("s1", "\u{2733} Claude Code");
    io.world
        .lock()
        .unwrap()
        .facts
        .entry("s1".into())
        .or_default()
        .row
        .nudge = Some(NudgeState {
        session_id: "s1".into(),
        unanswered: 5,
        last_nudge_ms: Some(START_MS - 60_000),
        acknowledged: true,
    });
    let (shutdown, views) = spawn_loop(default_config(), io.clone());
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert!(io.wake_times("s1").is_empty());
    assert!(views.borrow()["s1"].acknowledged());
    shutdown.cancel();
}

/// Restarted ten minutes after an acknowledged session answered its last nudge with a turn
/// that called no tool: that turn is still not an answer.
#[tokio::test(start_paused = true)]
async fn paused_clock_a_restart_after_an_idle_answer_keeps_the_series() {
    let io = FakeIo::new();
    io.add_session("s1", "\u{2733} Claude Code");
    let (nudged_ms, ended_ms) = (START_MS - 600_000, START_MS - 585_000);
    {
        let mut w = io.world.lock().unwrap();
        let path = PathBuf::from("/t/s1.jsonl");
        let turn = Turn {
            prompt_id: "p-1".into(),
            prompt: wakebridge::config::defaults().nudger.messages[0].clone(),
            tokens: 900,
            tools: 0,
        };
        w.turns.insert(path.clone(), turn);
        let facts = w.facts.entry("s1".into()).or_default();
        facts.row.nudge = Some(NudgeState {
            session_id: "s1".into(),
            unanswered: 5,
            last_nudge_ms: Some(nudged_ms),
            acknowledged: true,
        });
        heard(facts, "Stop", ended_ms);
        facts.transcript = Some(FileStamp {
            size: 1,
            mtime_ms: ended_ms + 100,
        });
        facts.row.transcript_path = Some(path.display().to_string());
    }
    let (shutdown, views) = spawn_loop(default_config(), io.clone());
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(io.wake_times("s1"), [0u64; 0]);
    assert!(
        views.borrow()["s1"].acknowledged(),
        "{:?}",
        views.borrow()["s1"]
    );
    shutdown.cancel();
}

/// `s1` nudged at 300, 390, 570, 930 and 1650 s (acknowledged idle), its last nudge answered
/// at 1665 s by a turn that called no tool, which gives the series back once charged.
async fn answered_idly_after_five(
    io: &FakeIo,
) -> (CancellationToken, watch::Receiver<SessionViews>) {
    io.add_session("s1", "\u{2733} Claude Code");
    let spawned = spawn_loop(default_config(), io.clone());
    tokio::time::sleep(Duration::from_secs(1665)).await;
    assert_eq!(io.wake_times("s1").len(), 5);
    let nudge = &wakebridge::config::defaults().nudger.messages[0];
    turn_ended(io, "s1", nudge, 0);
    spawned
}

/// An hour on, `s1` was nudged no more and is still acknowledged idle.
async fn still_acknowledged_an_hour_on(io: &FakeIo, views: &watch::Receiver<SessionViews>) {
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(io.wake_times("s1").len(), 5, "no new series");
    let view = views.borrow()["s1"].clone();
    assert!(view.acknowledged(), "{view:?}");
}

#[tokio::test(start_paused = true)]
async fn paused_clock_a_session_that_drops_out_for_a_poll_keeps_its_series() {
    let io = FakeIo::new();
    let (shutdown, views) = answered_idly_after_five(&io).await;
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert!(views.borrow()["s1"].acknowledged(), "given back");
    // panes.json is rewritten without it for a poll, then with it again.
    let pane = io.world.lock().unwrap().mapping.remove("s1").unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(views.borrow()["s1"].state, SessionState::NoPane);
    let recorded = io.world.lock().unwrap().records.len();
    io.world.lock().unwrap().mapping.insert("s1".into(), pane);
    still_acknowledged_an_hour_on(&io, &views).await;
    // Back as it was: not answered then given back (what the ledger alone would do).
    let w = io.world.lock().unwrap();
    let after = &w.records[recorded..];
    assert!(
        !after.iter().any(|r| matches!(r, Record::Nudge(_))),
        "{after:?}"
    );
    drop(w);
    shutdown.cancel();
}

/// The poll that first sees the turn answering the last nudge cannot see the pane: the turn is
/// neither life nor charged until it can, and the series stays given back.
#[tokio::test(start_paused = true)]
async fn paused_clock_a_turn_first_seen_while_its_pane_is_out_of_view_keeps_the_series() {
    let io = FakeIo::new();
    let (shutdown, views) = answered_idly_after_five(&io).await;
    let pane = io.world.lock().unwrap().panes.remove("%0").unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    io.world.lock().unwrap().panes.insert("%0".into(), pane);
    still_acknowledged_an_hour_on(&io, &views).await;
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn paused_clock_nothing_is_decided_while_the_ledger_cannot_be_read() {
    let io = FakeIo::new();
    io.add_session("s1", "\u{2733} Claude Code");
    io.add_inbox_session("s2");
    for sid in ["s1", "s2"] {
        io.owe_one(sid);
        io.world.lock().unwrap().facts.get_mut(sid).unwrap().pause = Some(paused());
    }
    io.world.lock().unwrap().ledger_down = true;
    let (shutdown, views) = spawn_loop(default_config(), io.clone());
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(io.world.lock().unwrap().wakes, []);
    assert!(views.borrow().sessions.is_empty());
    // Read again, the pause holds.
    io.world.lock().unwrap().ledger_down = false;
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(io.world.lock().unwrap().wakes, []);
    assert_eq!(views.borrow()["s1"].state, SessionState::Paused);
    assert_eq!(views.borrow()["s2"].state, SessionState::Paused);
    shutdown.cancel();
}

/// Takes the ledger down now; the polls begun over the next `span`.
async fn polls_while_the_ledger_is_down(io: &FakeIo, span: Duration) -> u32 {
    {
        let mut w = io.world.lock().unwrap();
        (w.ledger_down, w.polls) = (true, 0);
    }
    tokio::time::sleep(span).await;
    io.world.lock().unwrap().polls
}

/// Owed and refused, a session is polled each second; the ledger unreadable, what was owed is
/// unknown, and the loop polls at its own pace.
#[tokio::test(start_paused = true)]
async fn paused_clock_an_unreadable_ledger_is_polled_at_the_usual_pace() {
    let io = FakeIo::new();
    io.add_inbox_session("s1");
    io.owe_one("s1");
    (io.world.lock().unwrap().refuse).insert("s1".into(), Action::SpoolCooldown);
    let (shutdown, _views) = spawn_loop(default_config(), io.clone());
    tokio::time::sleep(Duration::from_millis(10_500)).await;
    assert!(
        io.world.lock().unwrap().polls >= 10,
        "each second while owed"
    );
    let polls = polls_while_the_ledger_is_down(&io, Duration::from_secs(100)).await;
    assert!((10..=11).contains(&polls), "{polls} polls in 100 s");
    shutdown.cancel();
}

/// Held at a limit, a session is polled at its resume time; the ledger unreadable from before
/// then, that time (now past) does not make the loop poll four times a second.
#[tokio::test(start_paused = true)]
async fn paused_clock_an_unreadable_ledger_forgets_a_resume_time() {
    let io = FakeIo::new();
    io.add_session("s1", "\u{2733} Claude Code");
    limited(&io, "s1", 2, false);
    let (shutdown, _views) = spawn_loop(default_config(), io.clone());
    tokio::time::sleep(Duration::from_millis(10_500)).await;
    // The resume was due at 2 min + 60 s: 300 s is well past it.
    let polls = polls_while_the_ledger_is_down(&io, Duration::from_secs(290)).await;
    assert!((28..=30).contains(&polls), "{polls} polls in 290 s");
    shutdown.cancel();
}

// ---------------------------------------------------------------------------------------------
// Real tmux, real gate, real ledger, a scripted agent TUI.

struct Rig {
    _wake: tempfile::TempDir,
    wake_dir: PathBuf,
    gate: Arc<Gate>,
    store: Store,
    sessions: Arc<Sessions>,
}

fn rig(server: &TmuxServer, tmux_bin: Option<PathBuf>, sessions: &[(&str, &Agent)]) -> Rig {
    let wake = common::tempdir();
    let wake_dir = wake.path().to_path_buf();
    let mapping: serde_json::Map<String, serde_json::Value> = sessions
        .iter()
        .map(|(sid, agent)| {
            (
                (*sid).to_owned(),
                serde_json::json!({"mux": "tmux", "pane": agent.pane}),
            )
        })
        .collect();
    std::fs::write(
        wake_dir.join("panes.json"),
        serde_json::to_string(&mapping).unwrap(),
    )
    .unwrap();
    let mux = MuxConfig {
        tmux_socket: Some(server.socket().to_path_buf()),
        tmux_bin: tmux_bin.unwrap_or_else(|| PathBuf::from("tmux")),
        submit_delay: Duration::from_millis(100),
        ..MuxConfig::default()
    };
    let injector = Arc::new(Injector::new(&mux));
    let store = Store::open_in_memory().unwrap();
    let sessions = Arc::new(Sessions::default());
    let gate = Arc::new(Gate::new(
        wake_dir.clone(),
        3600.0,
        Duration::ZERO,
        injector,
        store.clone(),
        false,
        sessions.clone(),
    ));
    Rig {
        _wake: wake,
        wake_dir,
        gate,
        store,
        sessions,
    }
}

fn fast_config(base_ms: u64, acknowledge_after: u32) -> SessionConfig {
    SessionConfig {
        enabled: true,
        idle_after: Duration::from_secs(1),
        poll_interval: Duration::from_millis(100),
        schedule: Schedule {
            base: Duration::from_millis(base_ms),
            max: Duration::from_secs(30),
            acknowledge_after,
        },
        messages: vec![
            KeystrokeText::new("Keep going please.").unwrap(),
            KeystrokeText::new("Anything left?").unwrap(),
        ],
        echo_grace: Duration::from_millis(500),
        owed_after: Duration::from_millis(500),
        ..shipped()
    }
}

/// The real I/O over `rig`, its state files and feeds kept in the wake dir.
fn live_io(rig: &Rig, config: &SessionConfig) -> LiveIo {
    let mut context = config.context.clone();
    context.state_dir.clone_from(&rig.wake_dir);
    LiveIo::new(
        rig.gate.clone(),
        rig.store.clone(),
        rig.wake_dir.clone(),
        None,
        restart_settings(),
        context,
    )
}

fn live_loop(
    config: SessionConfig,
    rig: &Rig,
) -> (
    CancellationToken,
    watch::Receiver<SessionViews>,
    tokio::task::JoinHandle<()>,
) {
    let io = live_io(rig, &config);
    let (tx, rx) = watch::channel(SessionViews::default());
    let shutdown = CancellationToken::new();
    let keeper = Keeper::new(config, io, rig.sessions.clone(), tx);
    let task = tokio::spawn(run(keeper, shutdown.clone()));
    (shutdown, rx, task)
}

/// Waits (real time, bounded) until `cond` holds.
async fn wait_for(what: &str, limit: Duration, cond: impl FnMut() -> bool) {
    common::eventually(what, limit, cond).await;
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[tokio::test]
async fn real_tmux_idle_agent_is_nudged_with_doubling_gaps_until_acknowledged() {
    let server = TmuxServer::start();
    let agent = Agent::spawn(&server, "a", "idle");
    let rig = rig(&server, None, &[("sid-a", &agent)]);
    let started = unix_now();
    let (shutdown, views, task) = live_loop(fast_config(1000, 3), &rig);
    wait_for("three nudges", Duration::from_secs(20), || {
        agent.submits().len() >= 3
    })
    .await;
    // Nothing more once acknowledged, even though the nudges' own echo moved the window.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let submits = agent.submits();
    assert_eq!(submits.len(), 3, "{submits:?}");
    let texts: Vec<&str> = submits.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        texts,
        ["Keep going please.", "Anything left?", "Keep going please."]
    );
    let first = submits[0].0 - started;
    let gap1 = submits[1].0 - submits[0].0;
    let gap2 = submits[2].0 - submits[1].0;
    println!("first nudge after {first:.2}s, gaps {gap1:.2}s, {gap2:.2}s");
    assert!(first >= 1.0, "first nudge only after idle_after ({first})");
    assert!((0.9..1.8).contains(&gap1), "gap1 {gap1}");
    assert!((1.9..2.8).contains(&gap2), "gap2 {gap2}");
    let state = rig.store.session("sid-a").unwrap().unwrap().nudge.unwrap();
    assert_eq!((state.unanswered, state.acknowledged), (3, true));
    assert!(views.borrow()["sid-a"].acknowledged());
    let counts = common::delivery_counts(&rig.store);
    assert_eq!(counts.get("tmux"), Some(&3), "{counts:?}");
    // The record holds exactly the typed bytes: text, then a separate Enter.
    let bytes = std::fs::read_to_string(&agent.record).unwrap();
    assert_eq!(
        bytes,
        "Keep going please.\rAnything left?\rKeep going please.\r"
    );
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn real_tmux_activity_after_a_nudge_resets_the_backoff() {
    let server = TmuxServer::start();
    let agent = Agent::spawn(&server, "a", "idle");
    let rig = rig(&server, None, &[("sid-a", &agent)]);
    // The second nudge is due 8 s after the first: the work (2 s after it) has 6 s to be seen
    // however loaded the machine is (3 s of slack was not always enough).
    let (shutdown, _views, task) = live_loop(fast_config(8000, 5), &rig);
    // The ledger records a nudge after its keys are typed, so the agent sees a submit before
    // the state reaches the store: wait for the record, not the keystrokes.
    let recorded = || {
        rig.store
            .session("sid-a")
            .unwrap()
            .and_then(|row| row.nudge)
    };
    wait_for("first nudge recorded", Duration::from_secs(10), || {
        recorded().is_some_and(|state| state.unanswered == 1)
    })
    .await;
    let first_at = recorded().and_then(|state| state.last_nudge_ms);
    assert_eq!(agent.submits().len(), 1);
    // Real output, well past the echo grace (window_activity has one-second resolution).
    tokio::time::sleep(Duration::from_millis(2000)).await;
    agent.set("work");
    wait_for("second nudge recorded", Duration::from_secs(15), || {
        recorded().is_some_and(|state| state.last_nudge_ms != first_at)
    })
    .await;
    assert_eq!(agent.submits().len(), 2);
    let state = recorded().unwrap();
    assert_eq!(
        state.unanswered, 1,
        "the work answered the first nudge, so the second starts a new series"
    );
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn real_tmux_busy_dialog_and_marked_sessions_are_never_nudged() {
    let server = TmuxServer::start();
    let busy = Agent::spawn(&server, "busy", "busy");
    let dialog = Agent::spawn(&server, "dialog", "dialog");
    let marked = Agent::spawn(&server, "marked", "idle");
    let control = Agent::spawn(&server, "control", "idle");
    let rig = rig(
        &server,
        None,
        &[
            ("sid-busy", &busy),
            ("sid-dialog", &dialog),
            ("sid-marked", &marked),
            ("sid-control", &control),
        ],
    );
    wakebridge::wakedir::set_busy(&rig.wake_dir, "sid-marked").unwrap();
    let (shutdown, views, task) = live_loop(fast_config(1000, 5), &rig);
    wait_for("the control's nudges", Duration::from_secs(15), || {
        control.submits().len() >= 2
    })
    .await;
    for (name, agent) in [("busy", &busy), ("dialog", &dialog), ("marked", &marked)] {
        assert!(agent.submits().is_empty(), "{name} was nudged");
        let bytes = std::fs::read(&agent.record).unwrap_or_default();
        assert!(bytes.is_empty(), "{name} received keystrokes: {bytes:?}");
    }
    let v = views.borrow().clone();
    assert!(
        v["sid-busy"].state == SessionState::Working,
        "{:?}",
        v["sid-busy"]
    );
    assert!(
        v["sid-dialog"].state == SessionState::Dialog,
        "{:?}",
        v["sid-dialog"]
    );
    assert!(
        v["sid-marked"].state == SessionState::Working,
        "{:?}",
        v["sid-marked"]
    );
    shutdown.cancel();
    task.await.unwrap();
}

fn children_cpu() -> Duration {
    // SAFETY: rusage is plain integers, for which all-zero is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes into the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn self_cpu() -> Duration {
    // SAFETY: as above: all-zero is a valid rusage.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes into the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

#[tokio::test]
async fn real_tmux_one_list_panes_per_poll_and_captures_only_for_idle_candidates() {
    const PANES: usize = 100;
    const POLLS: usize = 10;
    let server = TmuxServer::start();
    // 96 panes whose title says nothing (never candidates), 4 idle agents (candidates).
    let mut agents = Vec::new();
    for i in 0..4 {
        agents.push((
            format!("sid-idle-{i}"),
            Agent::spawn(&server, &format!("a{i}"), "idle"),
        ));
    }
    let mut sleepers = Vec::new();
    for i in 4..PANES {
        let pane = server.new_pane("sleep 600");
        sleepers.push((
            format!("sid-quiet-{i}"),
            Agent {
                pane,
                record: PathBuf::new(),
                control: PathBuf::new(),
            },
        ));
    }
    let log = server.dir().join("tmux-calls.log");
    let wrapper = server.counting_tmux(&log);
    let all: Vec<(&str, &Agent)> = agents
        .iter()
        .chain(sleepers.iter())
        .map(|(sid, a)| (sid.as_str(), a))
        .collect();
    let rig = rig(&server, Some(wrapper), &all);
    let mut config = fast_config(60_000, 5);
    config.idle_after = Duration::ZERO;
    let io = live_io(&rig, &config);
    let (tx, views) = watch::channel(SessionViews::default());
    let mut nudger = Keeper::new(config, io, rig.sessions.clone(), tx);
    // Let the agents draw their idle title first.
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Poll 1 sees the four idle agents due: one capture each to classify them, then the gate
    // types, after its guard's own capture (is the prompt empty right before typing?), and
    // reads the prompt line at least twice: the text showing (Enter now), then gone
    // (submitted). A loaded machine can take one more read before the text shows (seen once in
    // a fresh-clone run: 17), never many more.
    nudger.poll().await;
    let first = count_lines(&log);
    assert_eq!(first.get("list-panes"), Some(&1), "{first:?}");
    let captures = first.get("capture-pane").copied().unwrap_or(0);
    assert!((16..=24).contains(&captures), "{first:?}");
    assert_eq!(first.get("send-keys"), Some(&8), "{first:?}");
    assert_eq!(views.borrow().sessions.len(), PANES);
    std::fs::remove_file(&log).unwrap();

    // Later polls: everyone is busy, unknown or backing off: one list-panes, nothing else.
    let cpu_before = children_cpu() + self_cpu();
    let wall = std::time::Instant::now();
    for _ in 0..POLLS {
        nudger.poll().await;
    }
    let wall = wall.elapsed();
    let cpu = children_cpu() + self_cpu() - cpu_before;
    let later = count_lines(&log);
    assert_eq!(later.get("list-panes"), Some(&POLLS), "{later:?}");
    assert_eq!(later.values().sum::<usize>(), POLLS, "{later:?}");
    println!(
        "nudger poll over {PANES} mapped tmux panes: {} processes per poll, {:.1} ms wall and \
         {:.1} ms CPU (daemon + children) per poll",
        later.values().sum::<usize>() / POLLS,
        wall.as_secs_f64() * 1000.0 / POLLS as f64,
        cpu.as_secs_f64() * 1000.0 / POLLS as f64,
    );
    for (_, agent) in &agents {
        assert_eq!(agent.submits().len(), 1);
    }
}

/// A restart waiting for `sid`, as `POST /rewind {"restart": true}` records it.
fn restart_asked(io: &FakeIo, sid: &str) {
    let mut w = io.world.lock().unwrap();
    w.facts.entry(sid.into()).or_default().rewind.pending = Some(RewindRow {
        session_id: sid.into(),
        why: RewindWhy::Restart,
        asked_ms: START_MS,
        done_ms: None,
        outcome: None,
        detail: None,
    });
}

#[tokio::test(start_paused = true)]
async fn paused_clock_a_restart_revives_a_dead_or_vanished_pane_at_once_and_waits_for_idle_otherwise()
 {
    let io = FakeIo::new();
    io.add_session("dead", "\u{2733} Claude Code");
    io.add_session("gone", "\u{2733} Claude Code");
    io.add_session("live", "\u{25d0} Claude Code");
    for sid in ["dead", "gone", "live"] {
        restart_asked(&io, sid);
    }
    {
        let mut w = io.world.lock().unwrap();
        w.panes.get_mut("%0").unwrap().dead = true;
        w.panes.remove("%1");
    }
    let (shutdown, views) = spawn_loop(default_config(), io.clone());
    // Several polls: each gone agent is started again once, the busy one not at all.
    tokio::time::sleep(Duration::from_secs(35)).await;
    let started = |io: &FakeIo| -> Vec<(String, bool)> {
        let w = io.world.lock().unwrap();
        w.restarts
            .iter()
            .map(|r| (r.session_id.clone(), r.in_place))
            .collect()
    };
    assert_eq!(
        started(&io),
        [("dead".to_owned(), true), ("gone".to_owned(), false)]
    );
    assert_eq!(views.borrow()["dead"].reason, "restarting");
    assert_eq!(views.borrow()["dead"].state, SessionState::Rewinding);
    assert!(
        views.borrow()["live"].state == SessionState::Working,
        "{:?}",
        views.borrow()["live"]
    );
    // The busy one settles into idle: restarted in its pane, with the re-hydration prompt.
    io.world.lock().unwrap().panes.get_mut("%2").unwrap().title = "\u{2733} Claude Code".into();
    tokio::time::sleep(Duration::from_secs(40)).await;
    assert_eq!(started(&io).len(), 3, "{:?}", started(&io));
    let w = io.world.lock().unwrap();
    let live = &w.restarts[2];
    assert_eq!((live.session_id.as_str(), live.in_place), ("live", true));
    assert!(live.message.as_str().starts_with("You were rewound"));
    assert_eq!(
        typed_texts_locked(&w, "live"),
        Vec::<String>::new(),
        "nothing typed by the loop"
    );
    drop(w);
    shutdown.cancel();
}

/// A session with no pane that its inbox alone reaches is kept like any other: paid what it is
/// owed mid-turn (the inbox hands it over between tool calls), nudged when it stops with no
/// screen read first, and never rewound or restarted (`/clear` cannot go through an inbox).
#[tokio::test(start_paused = true)]
async fn paused_clock_a_session_only_its_inbox_reaches_is_paid_nudged_and_never_rewound() {
    let io = FakeIo::new();
    for sid in ["idle", "busy", "failing", "restart"] {
        io.add_inbox_session(sid);
    }
    {
        let mut w = io.world.lock().unwrap();
        w.busy.insert("busy".into(), true);
        heard(w.facts.get_mut("busy").unwrap(), "PreToolUse", START_MS);
        // Its inbox refuses: tried again no sooner than a base gap (90 s), not every 2 s.
        w.refuse.insert("failing".into(), Action::SpoolMuxFailed);
    }
    io.owe_one("busy");
    io.owe_one("failing");
    restart_asked(&io, "restart");
    let (shutdown, views) = spawn_loop(default_config(), io.clone());

    tokio::time::sleep(Duration::from_secs(35)).await;
    let wake = wakebridge::mux::WAKE_PROMPT.to_owned();
    assert_eq!(
        typed_texts(&io, "busy"),
        [(0, wake.clone())],
        "paid at once"
    );
    assert_eq!(typed_texts(&io, "failing"), [(0, wake)]);
    {
        let w = io.world.lock().unwrap();
        let paid = w.records.iter().any(|r| {
            matches!(r, Record::Pay { session_id, how: Payment::Inbox, .. } if session_id == "busy")
        });
        assert!(paid, "{:?}", w.records);
        assert!(w.restarts.is_empty(), "no pane to restart in");
        let skipped = w.records.iter().find_map(|r| match r {
            Record::RewindEnded {
                session_id,
                outcome,
                detail,
                ..
            } if session_id == "restart" => Some((*outcome, detail.clone())),
            _ => None,
        });
        let (outcome, detail) = skipped.expect("the restart ended");
        assert_eq!(outcome, wakebridge::store::RewindOutcome::Skipped);
        assert!(detail.is_some_and(|d| d.contains("no pane")));
    }

    // Quiet since the start: the first nudge at idle_after (5 min), nothing looked at.
    tokio::time::sleep(Duration::from_secs(299 - 35)).await;
    assert_eq!(typed_texts(&io, "idle"), []);
    tokio::time::sleep(Duration::from_secs(12)).await;
    let nudges = typed_texts(&io, "idle");
    assert!(
        nudges.len() == 1 && (300..=310).contains(&nudges[0].0),
        "{nudges:?}"
    );
    assert_eq!(nudges[0].1, "Please continue.");
    assert_eq!(views.borrow()["idle"].state, SessionState::Nudged);
    let w = io.world.lock().unwrap();
    assert_eq!((w.captures, w.screen_reads), (0, 0), "no screen to read");
    drop(w);
    shutdown.cancel();
}

/// The Stop hook pays a debt between the poll's ledger read and the loop's send: told once.
#[tokio::test(start_paused = true)]
async fn paused_clock_a_debt_its_stop_hook_paid_meanwhile_is_not_told_again() {
    let io = FakeIo::new();
    io.add_inbox_session("s1");
    io.owe_one("s1");
    io.world.lock().unwrap().hook_pays_after_read = Some("s1".into());
    let (shutdown, _views) = spawn_loop(default_config(), io.clone());
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(typed_texts(&io, "s1"), []);
    let w = io.world.lock().unwrap();
    assert!(!w.records.iter().any(|r| matches!(r, Record::Pay { .. })));
    drop(w);
    shutdown.cancel();
}

/// Held at a usage limit with no pane: no screen says whether Claude Code's own auto-continue
/// is armed, so it is given its time after the reset; then the resume goes to the inbox.
#[tokio::test(start_paused = true)]
async fn paused_clock_a_limited_session_only_its_inbox_reaches_is_resumed_through_it() {
    let io = FakeIo::new();
    io.add_inbox_session("held");
    limited(&io, "held", 1, false);
    let (shutdown, views) = spawn_loop(default_config(), io.clone());
    // The reset at 60 s, its grace to 120 s, auto-continue's time (2 min) to 180 s.
    tokio::time::sleep(Duration::from_secs(179)).await;
    assert_eq!(typed_texts(&io, "held"), []);
    let view = views.borrow()["held"].clone();
    assert!(
        view.reason.ends_with("auto-continue goes first, watching"),
        "{view:?}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let resumed = typed_texts(&io, "held");
    assert!(
        resumed.len() == 1 && (180..=181).contains(&resumed[0].0),
        "{resumed:?}"
    );
    assert_eq!(resumed[0].1, "continue");
    assert_eq!(views.borrow()["held"].state, SessionState::Working);
    let w = io.world.lock().unwrap();
    assert_eq!(w.screen_reads, 0, "no screen to read");
    assert!(w.menu_picks.is_empty());
    drop(w);
    shutdown.cancel();
}

fn typed_texts_locked(w: &World, sid: &str) -> Vec<String> {
    w.wakes
        .iter()
        .filter(|(s, _, _)| s == sid)
        .map(|(_, _, text)| text.clone())
        .collect()
}

/// Issue 28, part 1, with the real Claude Code through real turns (the scripted model): its
/// `idle_prompt` notification, fired a while after every turn ends (here 12 s, past the echo
/// grace and before the next nudge is due), reports the session waiting. It is no sign of life:
/// the backoff grows and the session falls silent after `acknowledge_after` nudges, each told to
/// the model once.
#[tokio::test]
async fn real_claude_code_idle_notifications_do_not_restart_the_nudge_series() {
    let Some(claude) = common::real_claude() else {
        common::skip_or_fail("no `claude` on PATH", common::GET_CLAUDE);
        return;
    };
    let model = common::model::Model::start().await;
    let tmux = TmuxServer::start();
    let server = crate::common::rig::start_daemon_with(
        &tmux,
        None,
        &[
            ("WAKEBRIDGE_NUDGER__IDLE_AFTER", "1s"),
            ("WAKEBRIDGE_NUDGER__POLL_INTERVAL", "500ms"),
            ("WAKEBRIDGE_NUDGER__BASE_COOLDOWN", "16s"),
            ("WAKEBRIDGE_NUDGER__MAX_COOLDOWN", "64s"),
            ("WAKEBRIDGE_NUDGER__ACKNOWLEDGE_AFTER", "3"),
        ],
    )
    .await;
    let global = serde_json::json!({"messageIdleNotifThresholdMs": 12_000});
    let session = common::claude::RealClaude::start_with(
        &claude,
        &tmux,
        &server,
        &model.claude_env(),
        &global,
    )
    .await;
    let sid = session.sid.clone();
    // A session with nothing to do: each nudge is answered with a line and nothing else.
    let messages = &wakebridge::config::defaults().nudger.messages;
    for message in messages {
        model.on(message, common::model::Reply::text("Nothing left to do."));
    }
    session.submit(&tmux, "hello").await;
    let context = || format!("{}\n{}", model.transcript(), session.hooks());
    let status = server
        .session_until(
            &sid,
            "acknowledged idle",
            Duration::from_secs(150),
            |s| s["nudge"]["acknowledged"] == true,
            context,
        )
        .await;
    assert_eq!(status["nudge"]["unanswered"], 3, "{status}");
    let idle_notifications = session.hooks().matches("\"idle_prompt\"").count();
    assert!(
        idle_notifications >= 2,
        "the notifications this is about fired between the nudges: {}",
        context()
    );
    // Quiet from here: more idle notifications, no more nudges.
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(messages.len(), 3, "one nudge of each default message");
    for message in messages {
        assert_eq!(model.told(message), 1, "{message}: {}", context());
    }
    assert_eq!(model.told("hello"), 1, "{}", context());
}
