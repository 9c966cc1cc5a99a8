//! The loop that keeps every session, one look per session per tick. A full tick reads
//! `panes.json`, ONE `tmux list-panes -a` snapshot, Claude Code's registry, the usage windows and
//! the ledger's facts of every session once; follows each session's transcript and status-line
//! feed; then per session feeds what it saw to the session's value, asks `session::decide` for
//! the next step (reading the screen first when told to), publishes every session's view, and
//! performs the steps through the wake gate. Between full ticks, a change wakes it for a
//! shorter one (the ledger and the transcripts, with the last snapshot): asked for from outside
//! (a bus event owed, a person's unpause, a reader of the views), a transcript or feed that
//! changed, or anything committed to the ledger (a hook's report), looked for every second.
//!
//! One loop over a table, not a task per session: one snapshot and one ledger read serve every
//! session, and each step is bounded (the gate's budget, `rewind::CLEAR_WAIT`). While anything
//! is owed it polls every [`OWED_POLL`]; it wakes for the earliest resume due. zellij panes have
//! no snapshot, and sessions with no pane no screen: for them the decision rests on the hooks,
//! the registry and the transcript. All I/O goes through [`SessionIo`], so tests drive the loop
//! on tokio's paused clock.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use jiff::tz::TimeZone;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::api::SessionState;
use crate::budget;
use crate::clock::duration_ms;
use crate::mux::KeystrokeText;
use crate::mux::tmux::create::is_missing_target;
use crate::mux::{PaneInfo, STEP_FLOOR};
use crate::reading::registry::RegistryReading;
use crate::session::decide::Step;
use crate::session::gate::{self, GateOutcome, Mode};
use crate::session::state::{Attempt, Session};
use crate::session::view;
use crate::session::{Next, SessionConfig, SessionViews, Sessions};
use crate::store::{Delivery, DeliverySource, LimitSeen, LimitSource, Pause, Record, RewindRow};
use crate::wakedir::target::PaneTarget;

mod charge;
mod consider;
mod nudge;
mod resume;
mod rewind;
mod warn;

pub use super::io::{Ledger, LiveIo, SessionFacts, SessionIo, Version};
pub use resume::RESUME_SENDER;
pub use rewind::REWIND_SENDER;

pub const NUDGER_SENDER: &str = "wakebridge-nudger";
pub const BUDGET_SENDER: &str = "wakebridge-budget";
pub const OWED_SENDER: &str = "wakebridge-owed";
/// Poll interval while any session is owed a wake, so a wake is typed within a second of
/// `owed_after`.
pub const OWED_POLL: Duration = Duration::from_secs(1);
/// How often the loop asks the ledger whether anything was committed (a hook's report, a
/// person's pause): a microsecond's read, so a change is acted on within a second.
pub const LEDGER_LOOK: Duration = Duration::from_secs(1);
/// Shortest gap between two ticks a change started: a streaming response writes its
/// transcript many times a second.
pub const CHANGE_MIN_GAP: Duration = Duration::from_secs(1);
/// Wait before retrying an owed wake, a resume or a `/clear` the gate did not type.
const OWED_RETRY: Duration = Duration::from_secs(2);
/// How long a session that left the loop keeps its state in memory.
const KEPT_AWAY: Duration = Duration::from_secs(3600);

/// Why a session only its inbox reaches is not rewound: the inbox gives `/clear` to the model
/// as text, and a restart needs a pane.
const NO_PANE: &str = "no pane: only its inbox reaches it, and /clear must be typed";

/// A step's outcome as the session's view shows it.
type Shown = (SessionState, String);

/// What a full tick read once for every session, and what a shorter tick reuses.
#[derive(Default)]
struct Around {
    mapping: BTreeMap<String, PaneTarget>,
    snapshot: Option<HashMap<String, PaneInfo>>,
    registry: HashMap<String, RegistryReading>,
    budgets: Vec<budget::Account>,
    local: Option<TimeZone>,
    /// The snapshot failed because the tmux server is gone (not merely slow).
    tmux_gone: bool,
}

pub struct Keeper<I> {
    config: SessionConfig,
    io: I,
    sessions: Arc<Sessions>,
    views: watch::Sender<SessionViews>,
    around: Around,
    paused_all: Option<Pause>,
    owes_any: bool,
    /// The earliest time a held session's decision changes, unix ms.
    wake_at_ms: Option<i64>,
    /// What the last tick read: its views are this fresh.
    version: Option<Version>,
}

impl<I: SessionIo> Keeper<I> {
    /// The loop over `sessions`, the table it shares with the gate.
    pub fn new(
        config: SessionConfig,
        io: I,
        sessions: Arc<Sessions>,
        views: watch::Sender<SessionViews>,
    ) -> Self {
        Self {
            config,
            io,
            sessions,
            views,
            around: Around::default(),
            paused_all: None,
            owes_any: false,
            wake_at_ms: None,
            version: None,
        }
    }

    /// What `/sessions` reads of the loop, replaced after each tick.
    pub fn views(&self) -> watch::Receiver<SessionViews> {
        self.views.subscribe()
    }

    /// A full tick: everything read again.
    pub async fn poll(&mut self) {
        self.version = self.io.version();
        let registry = self.io.registry().await;
        let mapping = self.io.mapping().await;
        let has_tmux = (mapping.values()).any(|t| matches!(t, PaneTarget::Tmux { .. }));
        let mut tmux_gone = false;
        let snapshot = match has_tmux {
            true => (self.io.tmux_snapshot().await)
                .inspect_err(|error| tmux_gone = is_missing_target(error))
                .ok(),
            false => None,
        };
        self.around = Around {
            mapping,
            snapshot,
            registry,
            budgets: self.io.budgets().await,
            local: Some(TimeZone::system()),
            tmux_gone,
        };
        self.tick(true).await;
        self.io.rested();
    }

    /// A shorter tick: the ledger, `panes.json` and the transcripts read again, the rest as the
    /// last full tick saw it (the tmux snapshot too, unless `panes.json` changed).
    pub async fn refresh(&mut self) {
        self.version = self.io.version();
        let mapping = self.io.mapping().await;
        if mapping != self.around.mapping {
            return self.poll().await;
        }
        self.tick(false).await;
    }

    async fn tick(&mut self, full: bool) {
        (self.owes_any, self.wake_at_ms) = (false, None);
        // Unread, the ledger's facts (a pause, a limit, what is owed, the backoff) are not
        // "none": nothing is decided until they can be read.
        let Some(ledger) = self.io.ledger(None, &self.around.registry).await else {
            return;
        };
        self.paused_all = ledger.paused_all;
        let mut facts = ledger.sessions;
        for sid in self.around.mapping.keys() {
            facts.entry(sid.clone()).or_insert_with(|| SessionFacts {
                row: crate::store::SessionRow {
                    session_id: sid.clone(),
                    ..Default::default()
                },
                pause: ledger.paused_all,
                ..SessionFacts::default()
            });
        }
        // An id given up at a `/clear` shows as part of the session that has the pane now.
        let mapping = &self.around.mapping;
        facts.retain(|sid, _| mapping.contains_key(sid) || !ledger.renamed.contains(sid));
        self.leave(&facts);
        if self.enter(&facts).await.is_none() {
            return;
        }
        let limits = self.config.limits.enabled;
        let waits = |f: &SessionFacts| {
            f.pause.is_some() || f.message_held || (limits && f.row.limit.is_some())
        };
        // A held or paused session's owed events, or those behind a message held for a human,
        // wait for its reset or a person, and one nothing reaches for a pane or an inbox: no
        // reason to poll every second.
        let mapping = &self.around.mapping;
        let reachable =
            |sid: &String, f: &SessionFacts| mapping.contains_key(sid) || f.inbox_live();
        self.owes_any =
            (facts.iter()).any(|(sid, f)| f.row.owed.is_some() && !waits(f) && reachable(sid, f));
        self.follow(&facts, full).await;
        let sids: Vec<String> = facts.keys().cloned().collect();
        for (sid, facts) in facts {
            self.session(&sid, |s| (s.facts, s.listed) = (facts, true));
        }
        // Each decision is performed once every view is published.
        let mut decided = Vec::new();
        for sid in sids {
            if let Some(step) = self.consider(&sid).await {
                decided.push((sid, step));
            }
        }
        self.publish();
        if decided.is_empty() {
            return;
        }
        for (sid, step) in decided {
            let shown = self.perform(&sid, step).await;
            self.session(&sid, |s| s.shown = shown);
        }
        self.publish();
    }

    /// Sessions that left (unmapped, gone from the ledger) keep their value for an hour: one
    /// back within it (panes.json rewritten, its inbox briefly unreachable) is as it was.
    fn leave(&self, facts: &BTreeMap<String, SessionFacts>) {
        let now = Instant::now();
        self.sessions.retain(|sid, session| {
            let away = (!facts.contains_key(sid)).then(|| *session.left_at.get_or_insert(now));
            (session.left_at, session.listed) = (away, away.is_none());
            away.is_none_or(|left| now - left < KEPT_AWAY)
        });
    }

    /// Sessions new to the loop take up their nudge series where the ledger left it: after a
    /// restart, and after more than [`KEPT_AWAY`] away. `None`: the ledger could not be read.
    async fn enter(&mut self, facts: &BTreeMap<String, SessionFacts>) -> Option<()> {
        let new: Vec<&String> = (facts.keys())
            .filter(|sid| !self.sessions.read(sid, |s| s.entered).unwrap_or(false))
            .collect();
        if new.is_empty() {
            return Some(());
        }
        let given = self.io.budget_nudges().await?;
        let (now, now_ms) = (Instant::now(), self.io.now_ms());
        let schedule = &self.config.schedule;
        for sid in new {
            let nudge = (facts.get(sid)).and_then(|f| f.row.nudge.clone());
            let nudge = nudge.unwrap_or_default();
            let last_nudge =
                (nudge.last_nudge_ms).and_then(|ms| Some((instant_at(now, now_ms, ms)?, ms)));
            let context = crate::context::followed::Followed::new(&self.config.context);
            self.sessions.with(sid, |session| {
                session.restore(nudge.unanswered, last_nudge, nudge.acknowledged, schedule);
                session.last_budget_ms = given.get(sid).copied();
                session.context = context;
            });
        }
        Some(())
    }

    /// Brings every live session's context up to date from its transcript and feed, and
    /// records the usage limits they showed.
    async fn follow(&mut self, facts: &BTreeMap<String, SessionFacts>, full: bool) {
        if !self.config.context.enabled {
            return;
        }
        let now_ms = self.io.now_ms();
        let mapping = &self.around.mapping;
        let live = (facts.iter()).filter(|(sid, f)| {
            let reachable = mapping.contains_key(*sid) || f.inbox_live();
            !view::ended(&f.row, reachable, now_ms)
        });
        let taken: Vec<_> = live
            .map(|(sid, f)| {
                let hint = f.row.transcript_path.as_deref();
                let agent = f.row.agent;
                let followed = self.session(sid, |s| {
                    s.context.hinted(hint, agent);
                    std::mem::take(&mut s.context)
                });
                (sid.clone(), followed)
            })
            .collect();
        let mut seen = Vec::new();
        for (sid, followed, limits) in self.io.follow(taken, full).await {
            self.session(&sid, |s| s.context = followed);
            seen.extend(limits.into_iter().filter(|_| self.config.limits.enabled));
        }
        if !seen.is_empty() {
            self.io.record(seen).await;
        }
    }

    async fn perform(&mut self, sid: &str, step: Step) -> Shown {
        let now_at = Instant::now();
        let target = self.around.mapping.get(sid).cloned();
        match step {
            Step::Wait(state, reason)
            | Step::WaitUntil(_, state, reason)
            | Step::Later(_, _, state, reason) => (state, reason),
            Step::Look(_) => (SessionState::Idle, "screen read twice".into()),
            Step::Nudge => self.nudge(sid).await,
            Step::BudgetNudge(unused) => self.budget_nudge(sid, unused).await,
            Step::PayOwed(mode) => self.pay_owed(sid, mode).await,
            Step::Warn(level, text) => self.warn(sid, level, &text).await,
            Step::HeldFromScreen(notice) => {
                // Not a dialog to wait out: a limit, held from now on.
                let now_ms = self.io.now_ms();
                let seen = LimitSeen::of_notice(sid, notice, LimitSource::Screen, now_ms, false);
                self.io.record(vec![Record::Limited(seen)]).await;
                (SessionState::Limited, "limited (seen on screen)".into())
            }
            Step::ScreenBlocked(verdict) => {
                // Seen only on the screen (a dialog, a spinner): look again no sooner than a
                // base gap, so a long-open dialog costs one capture per gap, not one per poll.
                let base = self.config.schedule.base;
                self.session(sid, |session| {
                    session.retry_in(Attempt::Nudge, now_at, base);
                    session.screen_block = Some(verdict);
                });
                (verdict.state(), verdict.describe())
            }
            Step::Resume { menu, shown, tries } => self.resume(sid, &shown, menu, tries).await,
            Step::Lift => self.lift(sid).await,
            Step::MetAgain(notice, shown) => self.met_again(sid, notice, shown).await,
            Step::GiveUp { shown, tries } => self.give_up(sid, shown, tries).await,
            Step::SkipRewind(pending, detail) => self.skip_rewind(sid, &pending, detail).await,
            Step::Rewind(pending) => match &target {
                Some(target) => self.clear_and_rehydrate(sid, target, &pending).await,
                None => self.skip_rewind(sid, &pending, NO_PANE.into()).await,
            },
            Step::Restart { pending, in_place } => match &target {
                Some(target) => self.begin_restart(sid, target, &pending, in_place).await,
                None => self.skip_rewind(sid, &pending, NO_PANE.into()).await,
            },
        }
    }

    /// Tells `sid` `text` through the gate. Its typing record (the gate keeps it) has the time
    /// told, whoever did the telling.
    async fn tell(&mut self, sid: &str, text: &KeystrokeText, mode: Mode) -> GateOutcome {
        let before = Instant::now();
        let outcome = self.io.wake(sid, text, mode).await;
        if outcome.action.woke() {
            self.session(sid, |s| s.typing.at = s.typing.at.max(Some(before)));
        }
        outcome
    }

    /// Changes `sid`'s value in the table.
    fn session<T>(&self, sid: &str, change: impl FnOnce(&mut Session) -> T) -> T {
        self.sessions.with(sid, change)
    }

    /// Remembers `pending` as taken, under the id it was asked as: the session it rewinds goes
    /// by another id once its `/clear` is done, and must not take it again.
    fn take_rewind(&self, pending: &RewindRow) {
        self.session(&pending.session_id, |s| {
            s.rewinds_taken.insert(pending.asked_ms)
        });
    }

    fn rewind_taken(&self, pending: &RewindRow) -> bool {
        let taken = |s: &Session| s.rewinds_taken.contains(&pending.asked_ms);
        self.sessions
            .read(&pending.session_id, taken)
            .unwrap_or(false)
    }

    fn wake_at(&mut self, at_ms: i64) {
        self.wake_at_ms = Some(self.wake_at_ms.map_or(at_ms, |d| d.min(at_ms)));
    }

    /// Renders every session's view from its value and the tick's facts, and publishes them.
    fn publish(&self) {
        let now = Instant::now();
        let now_ms = self.io.now_ms();
        let local = self.around.local.clone().unwrap_or_else(TimeZone::system);
        let schedule = self.config.schedule;
        let shown = self.sessions.each(|sid, session| {
            let watched = match self.config.can_type {
                false => Some("the spool backend types nothing"),
                true => view::kept(&session.facts, self.config.keep).err(),
            };
            let next_nudge_at = match schedule.next(&session.count, session.typing.at) {
                Next::At(at) if !session.acknowledged && watched.is_none() => {
                    Some(ms_at(now, now_ms, at))
                }
                _ => None,
            };
            let rendered = view::Rendered {
                pane: self.around.mapping.get(sid),
                next_nudge_at,
                watched,
                now_ms,
                local: &local,
            };
            let status = view::render(sid, session, rendered);
            session.listed.then(|| (sid.to_owned(), status))
        });
        self.views.send_replace(SessionViews {
            version: self.version,
            sessions: Arc::new(shown.into_iter().collect()),
            paused_all: self.paused_all,
        });
    }
}

/// The delivery row, and the session's wake (the cooldown's start) when keystrokes went in.
fn typed_records(
    source: DeliverySource,
    sender: &str,
    sid: &str,
    at_ms: i64,
    outcome: &GateOutcome,
) -> Vec<Record> {
    let mut records = vec![typed_row(source, sender, sid, at_ms, outcome)];
    if outcome.action.woke() {
        records.push(Record::Wake {
            session_id: sid.to_owned(),
            at_ms,
        });
    }
    records
}

fn typed_row(
    source: DeliverySource,
    sender: &str,
    sid: &str,
    at_ms: i64,
    outcome: &GateOutcome,
) -> Record {
    Record::Delivery(Delivery {
        at_ms,
        sender: sender.to_owned(),
        inject_us: gate::inject_us(outcome),
        error_kind: outcome.error_kind.map(str::to_owned),
        ..gate::delivery_row(source, None, sid, outcome.action)
    })
}

/// The monotonic instant of wall time `ms`; `None` before the clock's origin, `now` if future.
fn instant_at(now: Instant, now_ms: i64, ms: i64) -> Option<Instant> {
    let ago = u64::try_from(now_ms.saturating_sub(ms)).unwrap_or(0);
    now.checked_sub(Duration::from_millis(ago))
}

fn ms_at(now: Instant, now_ms: i64, at: Instant) -> i64 {
    if at >= now {
        now_ms.saturating_add(duration_ms(at - now))
    } else {
        now_ms.saturating_sub(duration_ms(now - at))
    }
}

/// Whether views made at `made` show everything `now` does.
pub fn covered(made: Option<Version>, now: &Version) -> bool {
    made.is_some_and(|made| made.covers(now))
}

pub async fn run<I: SessionIo>(mut keeper: Keeper<I>, shutdown: CancellationToken) {
    if !keeper.config.enabled {
        tracing::info!("nudges off ([nudger] enabled = false); owed wakes are still typed");
    }
    tracing::info!(
        idle_after_s = keeper.config.idle_after.as_secs(),
        poll_ms = duration_ms(keeper.config.poll_interval),
        "session loop started"
    );
    let sessions = keeper.sessions.clone();
    // Full ticks keep their own clock: a session at work changes its transcript every second,
    // and the shorter ticks that follow must not push the next full one away for ever.
    let mut last_full = Instant::now();
    let mut full = true;
    'ticks: loop {
        if full {
            last_full = Instant::now();
        }
        // A tick is never cut short: dropping it mid-injection could leave a nudge typed but
        // not submitted. It is bounded by the snapshot, capture and injection budgets.
        match full {
            true => keeper.poll().await,
            false => keeper.refresh().await,
        }
        let ended = Instant::now();
        let interval = match keeper.owes_any {
            true => keeper.config.poll_interval.min(OWED_POLL),
            false => keeper.config.poll_interval,
        };
        let mut due = last_full + interval;
        if let Some(due_ms) = keeper.wake_at_ms {
            // Measured from now (the tick took a while), not from its start.
            let until_due = u64::try_from(due_ms - keeper.io.now_ms()).unwrap_or(0);
            due = due.min(ended + Duration::from_millis(until_due).max(STEP_FLOOR));
        }
        // A full tick once the interval ran out (or a held session's decision changes now); a
        // shorter one before that when the loop was asked to look again, a transcript or feed
        // changed, or the ledger moved.
        let changed = loop {
            let look = tokio::time::sleep(LEDGER_LOOK.min(interval));
            tokio::select! {
                () = shutdown.cancelled() => break 'ticks,
                () = tokio::time::sleep_until(due) => break false,
                () = sessions.changed() => break true,
                () = keeper.io.changed() => break true,
                () = look => {
                    if keeper.io.version().is_some_and(|v| !covered(keeper.version, &v)) {
                        break true;
                    }
                }
            }
        };
        if changed {
            // A streaming transcript changes many times a second: a rest between two ticks,
            // measured from the end of the last (a long tick is no rest).
            let gap = (ended + CHANGE_MIN_GAP).min(due);
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep_until(gap) => {}
            }
        }
        full = !changed || Instant::now() >= due;
    }
    tracing::debug!("session loop stopped");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_and_monotonic_times_convert_both_ways() {
        let now = Instant::now();
        let later = now + Duration::from_secs(5);
        assert_eq!(ms_at(now, 10_000, later), 15_000);
        let before = instant_at(now, 10_000, 7_000);
        if let Some(before) = before {
            assert_eq!(ms_at(now, 10_000, before), 7_000);
        }
        assert_eq!(instant_at(now, 10_000, 20_000), Some(now));
    }
}
