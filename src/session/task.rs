//! The loop that keeps every session: each `poll_interval` it reads `panes.json` and the
//! sessions with no pane that their inbox reaches, takes ONE `tmux list-panes -a` snapshot,
//! reads the registry and the ledger's facts once, then per
//! session feeds what it saw to the session's value, asks `session::decide` for the next step
//! (reading the screen first when told to) and performs it through the wake gate.
//!
//! One loop over a map, not a task per session: one snapshot and one ledger read serve every
//! session, and each step is bounded (the gate's budget, `rewind::CLEAR_WAIT`). While anything is
//! owed it polls every [`OWED_POLL`]; it wakes for the earliest resume due. zellij panes have no
//! snapshot, and sessions with no pane no screen: for them the decision rests on the hooks, the
//! registry and the transcript. All I/O
//! goes through [`SessionIo`], so tests drive the loop on tokio's paused clock.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use jiff::tz::TimeZone;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::api::SessionState;
use crate::budget::{self, policy};
use crate::claude::hooks::HookKind;
use crate::claude::registry::RegistryReading;
use crate::claude::screen;
use crate::clock::duration_ms;
use crate::mux::tmux::create::is_missing_target;
use crate::mux::{PaneInfo, STEP_FLOOR};
use crate::session::decide::{
    LOOK_EVERY_MS, Look, Now, PaneSeen, Screen, Seen, Step, decide, resume_times,
};
use crate::session::gate::{self, GateOutcome};
use crate::session::hours::in_hours;
use crate::session::observe::{Activity, Movement, Observation};
use crate::session::state::{Attempt, Session};
use crate::session::{Next, NudgerConfig, SessionView, SessionViews, Sessions};
use crate::store::{Delivery, DeliverySource, LimitSeen, LimitSource, Record};
use crate::telemetry::notice::{Notice, NoticeKind};
use crate::wakedir::target::PaneTarget;

mod charge;
mod nudge;
mod resume;
mod rewind;

pub use super::io::{LiveIo, SessionFacts, SessionIo};
pub use resume::RESUME_SENDER;
pub use rewind::REWIND_SENDER;

pub const NUDGER_SENDER: &str = "wakebridge-nudger";
pub const BUDGET_SENDER: &str = "wakebridge-budget";
pub const OWED_SENDER: &str = "wakebridge-owed";
/// Poll interval while any session is owed a wake, so a wake is typed within a second of
/// `owed_after`.
pub const OWED_POLL: Duration = Duration::from_secs(1);
/// Wait before retrying an owed wake, a resume or a `/clear` the gate did not type.
const OWED_RETRY: Duration = Duration::from_secs(2);
/// How long a session that left the loop keeps its state in memory.
const KEPT_AWAY: Duration = Duration::from_secs(3600);

/// Why a session only its inbox reaches is not rewound: the inbox gives `/clear` to the model
/// as text, and a restart needs a pane.
const NO_PANE: &str = "no pane: only its inbox reaches it, and /clear must be typed";

/// A step's outcome as the session's view shows it.
type Shown = (SessionState, String);

/// What one poll read once for every session.
struct Around {
    snapshot: Option<HashMap<String, PaneInfo>>,
    registry: HashMap<String, RegistryReading>,
    budgets: Vec<budget::Account>,
    local: TimeZone,
    /// The snapshot failed because the tmux server is gone (not merely slow).
    tmux_gone: bool,
}

pub struct Keeper<I> {
    config: NudgerConfig,
    io: I,
    sessions: Arc<Sessions>,
    views: watch::Sender<SessionViews>,
    owes_any: bool,
    /// The earliest time a held session's decision changes, unix ms.
    wake_at_ms: Option<i64>,
}

impl<I: SessionIo> Keeper<I> {
    /// The loop over `sessions`, the table it shares with the gate.
    pub fn new(
        config: NudgerConfig,
        io: I,
        sessions: Arc<Sessions>,
        views: watch::Sender<SessionViews>,
    ) -> Self {
        Self {
            config,
            io,
            sessions,
            views,
            owes_any: false,
            wake_at_ms: None,
        }
    }

    /// What `/sessions` reads of the loop, replaced after each poll.
    pub fn views(&self) -> watch::Receiver<SessionViews> {
        self.views.subscribe()
    }

    pub async fn poll(&mut self) {
        (self.owes_any, self.wake_at_ms) = (false, None);
        let registry = self.io.registry().await;
        // Its pane, or `None`: a session told something that only its inbox reaches.
        let mut kept: BTreeMap<String, Option<PaneTarget>> = (self.io.mapping().await)
            .into_iter()
            .map(|(sid, pane)| (sid, Some(pane)))
            .collect();
        let (live, mapped) = (registry.keys().cloned(), kept.keys().cloned());
        // Unread, the ledger's facts (a pause, a limit, what is owed, the backoff) are not
        // "none": nothing is decided until they can be read.
        let reached = (self.io).reached_by_inbox(live.collect(), mapped.collect());
        let Some(reached) = reached.await else { return };
        for sid in reached {
            kept.entry(sid).or_insert(None);
        }
        let Some(facts) = self.io.session_facts(kept.keys().cloned().collect()).await else {
            return;
        };
        let now = Instant::now();
        // One that left (panes.json rewritten, its inbox briefly unreachable) comes back within
        // the hour as it was: what it last showed is still its baseline.
        self.sessions.retain(|sid, session| {
            let away = (!kept.contains_key(sid)).then(|| *session.left_at.get_or_insert(now));
            session.left_at = away;
            away.is_none_or(|left| now - left < KEPT_AWAY)
        });
        if self.enter(&kept, &facts).await.is_none() {
            return;
        }
        let has_tmux = kept
            .values()
            .any(|t| matches!(t, Some(PaneTarget::Tmux { .. })));
        let mut tmux_gone = false;
        let snapshot = if has_tmux {
            (self.io.tmux_snapshot().await)
                .inspect_err(|error| tmux_gone = is_missing_target(error))
                .ok()
        } else {
            None
        };
        // A held or paused session's owed events, or those behind a message held for a human,
        // wait for its reset or a person: no reason to poll every second.
        let limits = self.config.limits.enabled;
        let waits = |f: &SessionFacts| f.paused || f.message_held || (limits && f.limit.is_some());
        self.owes_any = facts.values().any(|f| f.owed.is_some() && !waits(f));
        let around = Around {
            snapshot,
            registry,
            budgets: self.io.budgets().await,
            local: TimeZone::system(),
            tmux_gone,
        };
        let mut views = BTreeMap::new();
        for (sid, target) in &kept {
            let facts = facts.get(sid).cloned().unwrap_or_default();
            let view = self.consider(sid, target.as_ref(), facts, &around).await;
            views.insert(sid.clone(), view);
        }
        self.views.send_replace(Arc::new(views));
    }

    /// Sessions new to the loop take up their nudge series where the ledger left it: after a
    /// restart, and after more than [`KEPT_AWAY`] away. `None`: the ledger could not be read.
    async fn enter(
        &mut self,
        kept: &BTreeMap<String, Option<PaneTarget>>,
        facts: &HashMap<String, SessionFacts>,
    ) -> Option<()> {
        let new: Vec<&String> = (kept.keys())
            .filter(|sid| !self.sessions.read(sid, |s| s.entered).unwrap_or(false))
            .collect();
        if new.is_empty() {
            return Some(());
        }
        let given = self.io.budget_nudges().await?;
        let (now, now_ms) = (Instant::now(), self.io.now_ms());
        let schedule = &self.config.schedule;
        for sid in new {
            let nudge = facts
                .get(sid)
                .and_then(|f| f.nudge.clone())
                .unwrap_or_default();
            let last_nudge =
                (nudge.last_nudge_ms).and_then(|ms| Some((instant_at(now, now_ms, ms)?, ms)));
            self.sessions.with(sid, |session| {
                session.restore(nudge.unanswered, last_nudge, nudge.acknowledged, schedule);
                session.last_budget_ms = given.get(sid).copied();
            });
        }
        Some(())
    }

    async fn consider(
        &mut self,
        sid: &str,
        target: Option<&PaneTarget>,
        facts: SessionFacts,
        around: &Around,
    ) -> SessionView {
        let now = Now {
            at: Instant::now(),
            ms: self.io.now_ms(),
            local: around.local.clone(),
        };
        let account = (facts.transcript_path.as_deref()).and_then(budget::account_of);
        let account = budget::of_account(&around.budgets, account.as_deref());
        let given = self.sessions.read(sid, |s| s.last_budget_ms).flatten();
        let outlook = policy::outlook(&self.config.budget, account, now.ms, given);
        let snapshot = around.snapshot.as_ref();
        let mut pane = target.map_or(PaneSeen::Inbox, |_| PaneSeen::Live);
        let mut info = None;
        if let Some(PaneTarget::Tmux { pane: id, .. }) = target {
            info = snapshot.and_then(|panes| panes.get(id));
            let gone = |why, revive| PaneSeen::Gone { why, revive };
            pane = match (snapshot, info) {
                (None, _) if around.tmux_gone => gone("tmux server gone", Some(false)),
                (None, _) => gone("tmux unavailable", None),
                (Some(_), None) => gone("pane not found", Some(false)),
                (_, Some(info)) if info.dead => gone("pane dead", Some(true)),
                (_, Some(_)) => PaneSeen::Live,
            };
        }
        let hook = facts.hook.as_ref();
        let mut obs = Observation {
            busy_marker: self.io.busy(sid),
            title: info.map(|info| screen::title_state(&info.title)),
            window_activity_s: info.and_then(|info| info.window_activity),
            screen: None,
            transcript: facts.transcript,
            hook: hook.map(|(event, seen)| (HookKind::of_recorded(event), *seen)),
            registry: around.registry.get(sid).cloned(),
        };
        let typed_ms = self.io.last_typed(sid).map(|t| ms_at(now.at, now.ms, t));
        // With its pane gone from view, what moved is neither seen nor charged: a turn charged
        // before its answer is seen could not give that answer back.
        if !matches!(pane, PaneSeen::Gone { .. }) {
            if let Movement::Real { signal, at_ms } = self.track(sid, &obs, now.ms, typed_ms) {
                self.answered(sid, signal, at_ms).await;
            }
            self.charge(sid, &obs, &facts, now.ms).await;
        }
        if facts.paused {
            // Not even a look: a paused session gets nothing, and its view says why.
            return self.view(sid, SessionState::Paused, "paused by a person".into());
        }
        let limit = facts.limit.clone().filter(|_| self.config.limits.enabled);
        if let Some(limit) = &limit {
            let told = self.session(sid, |s| s.limit_told.replace(limit.since_ms));
            if told != Some(limit.since_ms) {
                let reset =
                    crate::claude::limits::describe_reset(limit.resets_at_ms, now.ms, &now.local);
                self.io.notify(Notice::new(
                    sid,
                    NoticeKind::UsageLimit,
                    format!("{}, {reset}", limit.kind),
                ));
            }
            if let Some(at) = resume_times(limit, &self.config, now.ms) {
                self.wake_at(at);
            }
        }
        let pending = facts.rewind.pending.as_ref();
        let taken = pending.is_some_and(|p| {
            let key = taken_key(p);
            self.session(sid, |s| s.rewinds_taken.contains(&key))
        });
        let mut text: Option<String> = None;
        let mut looked = false;
        let step = loop {
            let screen = match (&text, looked) {
                (Some(text), _) => Screen::Text(text),
                (None, true) => Screen::Unreadable,
                (None, false) => Screen::NotRead,
            };
            let seen = Seen {
                pane,
                obs: &obs,
                screen,
                tmux: matches!(target, Some(PaneTarget::Tmux { .. })),
                owed: facts.owed,
                limit: limit.as_ref(),
                message_held: facts.message_held,
                rewind: pending.map(|p| (p, taken)),
                rewind_last_done_ms: facts.rewind.last_performed_ms,
                last_typed: self.io.last_typed(sid),
                budget: outlook,
            };
            let step = self.session(sid, |session| decide(session, &seen, &self.config, &now));
            let step = in_hours(step, &self.config.hours, &now);
            // A screen read is asked for once: a second look is `perform`'s "screen read twice".
            let (&Step::Look(look), false) = (&step, looked) else {
                break step;
            };
            looked = true;
            if look == Look::WhileHeld {
                let next = now.ms.saturating_add(LOOK_EVERY_MS);
                self.session(sid, |s| s.limit_look_ms = Some(next));
            }
            text = self.look(sid, target, look).await;
            if look == Look::BeforeNudge {
                let Some(captured) = &text else { continue };
                obs.screen = Some(screen::read(captured));
                // The screen can show what the cheap signals cannot: a change since the last
                // look is the session at work.
                if let Movement::Real { signal, at_ms } = self.track(sid, &obs, now.ms, typed_ms) {
                    self.answered(sid, signal, at_ms).await;
                    let reason = format!("active ({signal})");
                    return self.view(sid, SessionState::Working, reason);
                }
            }
        };
        self.perform(sid, target, step).await
    }

    /// Reads the screen: a tmux pane's by one `capture-pane` before a nudge, else through the
    /// gate.
    async fn look(&self, sid: &str, target: Option<&PaneTarget>, look: Look) -> Option<String> {
        match (look, target) {
            (Look::BeforeNudge, Some(PaneTarget::Tmux { pane, .. })) => {
                (self.io.capture(pane).await)
                    .inspect_err(|error| {
                        tracing::debug!(session_id = sid, "nudger: capture-pane failed: {error}");
                    })
                    .ok()
            }
            _ => self.io.screen(sid).await,
        }
    }

    async fn perform(&mut self, sid: &str, target: Option<&PaneTarget>, step: Step) -> SessionView {
        let now_at = Instant::now();
        let (state, reason) = match step {
            Step::Wait(state, reason) => (state, reason),
            Step::WaitUntil(at_ms, state, reason) => {
                self.wake_at(at_ms);
                (state, reason)
            }
            Step::Later(attempt, wait, state, reason) => {
                self.session(sid, |s| s.retry_in(attempt, now_at, wait));
                (state, reason)
            }
            Step::Look(_) => (SessionState::Idle, "screen read twice".into()),
            Step::Nudge => self.nudge(sid).await,
            Step::BudgetNudge(unused) => self.budget_nudge(sid, unused).await,
            Step::PayOwed(mode) => self.pay_owed(sid, mode).await,
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
            Step::Rewind(pending) => match target {
                Some(target) => self.clear_and_rehydrate(sid, target, &pending).await,
                None => self.skip_rewind(sid, &pending, NO_PANE.into()).await,
            },
            Step::Restart { pending, in_place } => match target {
                Some(target) => self.begin_restart(sid, target, &pending, in_place).await,
                None => self.skip_rewind(sid, &pending, NO_PANE.into()).await,
            },
        };
        self.view(sid, state, reason)
    }

    /// Changes `sid`'s value in the table.
    fn session<T>(&self, sid: &str, change: impl FnOnce(&mut Session) -> T) -> T {
        self.sessions.with(sid, change)
    }

    fn track(
        &mut self,
        sid: &str,
        obs: &Observation,
        now_ms: i64,
        typed_ms: Option<i64>,
    ) -> Movement {
        let grace_ms = duration_ms(self.config.echo_grace);
        self.session(sid, |session| match &mut session.activity {
            Some(activity) => activity.observe(obs, now_ms, typed_ms, grace_ms),
            // Not seen yet, so not nudged yet by this daemon: its last nudge is the ledger's.
            None => {
                let (activity, movement) =
                    Activity::first(obs, now_ms, session.last_nudge_ms, grace_ms);
                session.activity = Some(activity);
                movement
            }
        })
    }

    /// The session showed life at `at_ms` (when its signal happened, not when it was seen: a
    /// turn seen only after a restart is still the turn that ended then).
    async fn answered(&mut self, sid: &str, signal: &str, at_ms: i64) {
        let now_ms = self.io.now_ms();
        let ((had, was_acknowledged), record) = self.session(sid, |session| {
            // Its series reset: nothing unanswered, not acknowledged.
            (
                session.answered(at_ms.min(now_ms)),
                session.nudge_record(sid),
            )
        });
        if was_acknowledged {
            tracing::info!(
                session_id = sid,
                signal,
                "session shows activity again; nudging resumes when it next stops"
            );
        } else if had {
            tracing::debug!(session_id = sid, signal, "nudge answered; backoff reset");
        }
        if had || was_acknowledged {
            self.io.record(vec![record]).await;
        }
    }

    fn wake_at(&mut self, at_ms: i64) {
        self.wake_at_ms = Some(self.wake_at_ms.map_or(at_ms, |d| d.min(at_ms)));
    }

    /// What `/sessions` shows of the session after this poll.
    fn view(&mut self, sid: &str, state: SessionState, reason: String) -> SessionView {
        let now = Instant::now();
        let now_ms = self.io.now_ms();
        let last_typed = self.io.last_typed(sid);
        let schedule = self.config.schedule;
        let looks_idle = matches!(
            state,
            SessionState::Idle
                | SessionState::Nudged
                | SessionState::AcknowledgedIdle
                | SessionState::Owed
        );
        self.session(sid, |session| {
            let next_nudge_at_ms = match schedule.next(&session.count, last_typed) {
                Next::At(at) => Some(ms_at(now, now_ms, at)),
                Next::Whenever | Next::Acknowledged => None,
            };
            SessionView {
                state,
                reason,
                unanswered: session.count.unanswered,
                last_nudge_ms: session.last_nudge_ms,
                next_nudge_at_ms: next_nudge_at_ms.filter(|_| !session.acknowledged),
                acknowledged: session.acknowledged,
                idle_since_ms: looks_idle
                    .then(|| session.activity.as_ref().map(Activity::quiet_since_ms))
                    .flatten(),
            }
        })
    }
}

/// The delivery row, and the session's wake (the cooldown's start) when keystrokes went in.
fn typed_records(sender: &str, sid: &str, at_ms: i64, outcome: &GateOutcome) -> Vec<Record> {
    let mut records = vec![typed_row(DeliverySource::Wake, sender, sid, at_ms, outcome)];
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

fn taken_key(pending: &crate::store::RewindRow) -> (String, i64) {
    (pending.session_id.clone(), pending.asked_ms)
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

pub async fn run<I: SessionIo>(mut keeper: Keeper<I>, shutdown: CancellationToken) {
    if !keeper.config.enabled {
        tracing::info!("nudges off ([nudger] enabled = false); owed wakes are still typed");
    }
    tracing::info!(
        idle_after_s = keeper.config.idle_after.as_secs(),
        poll_ms = duration_ms(keeper.config.poll_interval),
        "idle nudger started"
    );
    loop {
        let started = Instant::now();
        // A poll is never cut short: dropping it mid-injection could leave a nudge typed but
        // not submitted. It is bounded by the snapshot, capture and injection budgets.
        keeper.poll().await;
        let interval = if keeper.owes_any {
            keeper.config.poll_interval.min(OWED_POLL)
        } else {
            keeper.config.poll_interval
        };
        let mut next_poll = started + interval;
        if let Some(due_ms) = keeper.wake_at_ms {
            // Measured from now (the poll took a while), not from the poll's start.
            let until_due = u64::try_from(due_ms - keeper.io.now_ms()).unwrap_or(0);
            next_poll =
                next_poll.min(Instant::now() + Duration::from_millis(until_due).max(STEP_FLOOR));
        }
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep_until(next_poll) => {}
            () = keeper.io.owed_noted() => {}
        }
    }
    tracing::debug!("idle nudger stopped");
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
