//! The idle nudger task: every `poll_interval` it reads the `panes.json` mapping, takes ONE
//! `tmux list-panes -a` snapshot for all mapped tmux panes, reads Claude Code's session registry
//! and the ledger's hook facts once, decides per session (`nudge::signals`), and types the next
//! rotating message through the wake gate (`Gate::wake(.., Mode::Gated)`) into sessions that are
//! idle and due under the backoff (`nudge::schedule`). A pane's screen is captured only for a
//! session about to be nudged, to look for a dialog and a changed screen. Every nudge is recorded
//! in the ledger (a `Delivery` from `Nudge` and the session's `NudgeState`), and the state is
//! restored from there at start.
//!
//! It also pays owed wakes the session's own Stop hook did not (an Esc interrupt fires no hook;
//! sessions wired without hooks): a session the ledger says is owed a wake gets the wake prompt
//! typed once it has looked idle for `owed_after`, whatever its nudge backoff, and the poll runs
//! every [`OWED_POLL`] while anything is owed. `[nudger] enabled = false` stops the nudges, not
//! this. A session held at a usage limit gets neither: `resume` waits for the reset and resumes
//! it, and the loop wakes for that reset. A session with a rewind waiting gets it at its next
//! idle moment (`rewind`), after what it is owed and instead of a nudge.
//!
//! zellij panes have no snapshot here (no per-pane title or activity that costs one process for
//! all panes): for them the decision rests on the hook facts, the registry and the transcript.
//!
//! It owns the polling, the per-session bookkeeping and the [`NudgeView`]s it publishes; it does
//! not own typing (the gate and the injector), the idle rules (`nudge::signals`) or the backoff
//! arithmetic (`nudge::schedule`). All I/O goes through [`NudgerIo`] (`nudge::io`), so the loop
//! can be driven with tokio's paused clock and scripted signals.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::claude::hooks::HookKind;
use crate::claude::limits;
use crate::claude::registry::{RegistryReading, RegistryStatus};
use crate::claude::screen::{self, Title};
use crate::delivery::Action;
use crate::delivery::gate::{GateOutcome, Mode};
use crate::mux::{KeystrokeText, PaneInfo, STEP_FLOOR};
use crate::nudge::signals::{Activity, Movement, Observation, Verdict, classify};
use crate::nudge::{Next, NudgeCount, NudgeView, NudgeViews, NudgerConfig};
use crate::store::{
    Delivery, DeliverySource, LimitSeen, LimitSource, NudgeState, Owed, Payment, Record, RewindWhy,
};
use crate::telemetry::notice::{Notice, NoticeKind};
use crate::wakedir::target::PaneTarget;

mod resume;
mod rewind;

pub use super::io::{LiveIo, NudgerDeps, NudgerIo, SessionFacts};
pub use resume::RESUME_SENDER;
pub use rewind::REWIND_SENDER;

/// The `sender` of the nudger's ledger rows.
pub const NUDGER_SENDER: &str = "wakebridge-nudger";
/// The `sender` of the rows of owed wakes it types.
pub const OWED_SENDER: &str = "wakebridge-owed";
/// Poll interval while any session is owed a wake: `owed_after` is seconds, so a wake is typed
/// within a second of it (one `list-panes` a second, only while something is owed).
pub const OWED_POLL: Duration = Duration::from_secs(1);
/// After an owed wake the gate did not type (cooldown, a draft or menu, a failure), the next
/// try waits this long.
const OWED_RETRY: Duration = Duration::from_secs(2);

/// One session's bookkeeping.
#[derive(Debug, Default)]
struct Tracked {
    count: NudgeCount<Instant>,
    acknowledged: bool,
    activity: Option<Activity>,
    /// After a gate refusal or failure, no new attempt before this.
    retry_at: Option<Instant>,
    /// The ledger's last nudge (unix ms) for a session restored at start, until first seen.
    restored_nudge_ms: Option<i64>,
    /// Unix ms of the last nudge (for the ledger row).
    last_nudge_ms: Option<i64>,
    /// What the last capture showed that stopped a nudge (a dialog, a spinner), while
    /// `retry_at` holds the next look off.
    screen_block: Option<String>,
    /// After an owed wake was not typed, no new attempt before this.
    owed_retry_at: Option<Instant>,
    /// The action of the last owed wake not typed, so a draft left for an hour records one row,
    /// not one per attempt.
    owed_refused: Option<Action>,
    /// After a resume at a usage limit's reset could not be typed, no new attempt before this.
    resume_retry_at: Option<Instant>,
    /// The action of the last resume not typed (one row per refusal streak, as for owed wakes).
    resume_refused: Option<Action>,
    /// While held at a limit: when to look at the screen next (unix ms).
    limit_look_ms: Option<i64>,
    /// After a `/clear` the gate did not type, no new attempt before this.
    rewind_retry_at: Option<Instant>,
}

impl Tracked {
    /// How long nothing has moved, as of `now_ms` (nothing yet observed: zero).
    fn quiet_for(&self, now_ms: i64) -> Duration {
        let since = self
            .activity
            .as_ref()
            .map_or(now_ms, Activity::quiet_since_ms);
        Duration::from_millis(u64::try_from(now_ms - since).unwrap_or(0))
    }
}

/// The nudger: its settings, its I/O and what it knows about each session.
pub struct Nudger<I> {
    config: NudgerConfig,
    io: I,
    sessions: HashMap<String, Tracked>,
    views: watch::Sender<NudgeViews>,
    snapshot_warned: bool,
    /// Some mapped session was owed a wake at the last poll.
    owes_any: bool,
    /// The earliest resume (or look after one) due after the last poll, unix ms.
    resume_due_ms: Option<i64>,
    /// The rewinds (asked for as, asked at) this loop has performed or started: never twice,
    /// even while the ledger still shows one waiting (a restart running, a record that failed).
    rewinds_taken: HashSet<(String, i64)>,
    /// The last snapshot failed because the tmux server is gone (not merely slow).
    tmux_gone: bool,
    /// The limits (session, since) a human was told about in this run.
    limits_told: HashSet<(String, i64)>,
}

impl<I: NudgerIo> Nudger<I> {
    pub fn new(config: NudgerConfig, io: I, views: watch::Sender<NudgeViews>) -> Self {
        Self {
            config,
            io,
            sessions: HashMap::new(),
            views,
            snapshot_warned: false,
            owes_any: false,
            resume_due_ms: None,
            rewinds_taken: HashSet::new(),
            tmux_gone: false,
            limits_told: HashSet::new(),
        }
    }

    /// Loads the nudge states the ledger kept, so a restart neither forgets an acknowledged
    /// session nor restarts a backoff series from the beginning.
    pub async fn restore(&mut self) {
        let now = Instant::now();
        let now_ms = self.io.now_ms();
        for state in self.io.restore().await {
            let last_nudge = state
                .last_nudge_ms
                .and_then(|ms| instant_at(now, now_ms, ms));
            let tracked = Tracked {
                count: NudgeCount {
                    unanswered: state.unanswered,
                    last_nudge,
                },
                acknowledged: state.acknowledged
                    || self.config.schedule.acknowledged(state.unanswered),
                restored_nudge_ms: state.last_nudge_ms,
                last_nudge_ms: state.last_nudge_ms,
                ..Tracked::default()
            };
            self.sessions.insert(state.session_id, tracked);
        }
    }

    /// One poll over every mapped session.
    pub async fn poll(&mut self) {
        let mapping = self.io.mapping().await;
        self.sessions
            .retain(|sid, tracked| mapping.contains_key(sid) || tracked.activity.is_none());
        let has_tmux = mapping
            .values()
            .any(|t| matches!(t, PaneTarget::Tmux { .. }));
        self.tmux_gone = false;
        let snapshot = if has_tmux {
            match self.io.tmux_snapshot().await {
                Ok(panes) => {
                    self.snapshot_warned = false;
                    Some(panes)
                }
                Err(error) => {
                    self.tmux_gone = crate::mux::tmux::create::is_missing_target(&error);
                    if !self.snapshot_warned {
                        tracing::warn!(
                            "nudger: tmux list-panes failed ({error}); skipping tmux panes until it works"
                        );
                        self.snapshot_warned = true;
                    }
                    None
                }
            }
        } else {
            None
        };
        let facts = self
            .io
            .session_facts(mapping.keys().cloned().collect())
            .await;
        let registry = self.io.registry().await;
        // A held session's owed events wait for its reset: no reason to poll every second.
        let limits = self.config.limits.enabled;
        self.owes_any = facts
            .values()
            .any(|f| f.owed.is_some() && !(limits && f.limit.is_some()));
        self.resume_due_ms = None;
        let mut views = BTreeMap::new();
        for (sid, target) in &mapping {
            let view = self
                .consider(sid, target, snapshot.as_ref(), &facts, &registry)
                .await;
            views.insert(sid.clone(), view);
        }
        self.views.send_replace(Arc::new(views));
    }

    async fn consider(
        &mut self,
        sid: &str,
        target: &PaneTarget,
        snapshot: Option<&HashMap<String, PaneInfo>>,
        facts: &HashMap<String, SessionFacts>,
        registry: &HashMap<String, RegistryReading>,
    ) -> NudgeView {
        let now = Instant::now();
        let now_ms = self.io.now_ms();
        let grace_ms = millis(self.config.echo_grace);
        let mut obs = Observation {
            busy_marker: self.io.busy(sid),
            ..Observation::default()
        };
        if let PaneTarget::Tmux { pane, .. } = target {
            // An agent that is gone cannot wait for an idle moment: a restart revives it now.
            // (why, where a restart would start it: in its pane, elsewhere, or not at all while
            // tmux merely did not answer; a second agent on the same conversation is worse).
            let info = snapshot.and_then(|panes| panes.get(pane));
            let gone = match (snapshot, info) {
                (None, _) if self.tmux_gone => Some(("tmux server gone", Some(false))),
                (None, _) => Some(("tmux unavailable", None)),
                (Some(_), None) => Some(("pane not found", Some(false))),
                (_, Some(info)) if info.dead => Some(("pane dead", Some(true))),
                _ => None,
            };
            if let Some((why, revive)) = gone {
                let reason = match (
                    revive,
                    facts.get(sid).and_then(|f| f.rewind.pending.as_ref()),
                ) {
                    (Some(in_place), Some(pending)) if pending.why == RewindWhy::Restart => {
                        self.begin_restart(sid, target, pending, in_place).await
                    }
                    _ => why.to_owned(),
                };
                return self.view(sid, now, now_ms, reason);
            }
            if let Some(info) = info {
                obs.title = Some(screen::title_state(&info.title));
                obs.window_activity_s = info.window_activity;
            }
        }
        let owed = facts.get(sid).and_then(|f| f.owed);
        if let Some(f) = facts.get(sid) {
            obs.hook = f
                .hook
                .as_ref()
                .map(|(event, seen)| (HookKind::of_recorded(event), *seen));
            obs.transcript = f.transcript;
        }
        obs.registry = registry.get(sid).cloned();
        let typed_ms = self
            .io
            .last_typed(sid)
            .map(|t| now_ms.saturating_sub(millis(now.saturating_duration_since(t))));

        let movement = self.track(sid, &obs, now_ms, typed_ms, grace_ms);
        if let Movement::Real { signal, .. } = movement {
            self.answered(sid, signal).await;
        }
        if self.config.limits.enabled
            && let Some(limit) = facts.get(sid).and_then(|f| f.limit.clone())
        {
            return self.held_at_limit(sid, &obs, limit, now, now_ms).await;
        }
        if let Some(owed) = owed
            && let Some(view) = self.pay_owed(sid, &obs, owed, now, now_ms).await
        {
            return view;
        }
        if let Some(rewind) = facts.get(sid).map(|f| &f.rewind)
            && let Some(view) = self
                .rewind_step(sid, target, &obs, rewind, now, now_ms)
                .await
        {
            return view;
        }
        let verdict = classify(&obs);
        let Verdict::Idle(idle_reason) = verdict else {
            return self.view(sid, now, now_ms, verdict_text(&verdict));
        };
        if !self.config.enabled {
            return self.view(
                sid,
                now,
                now_ms,
                format!("idle ({idle_reason}), nudges off"),
            );
        }
        let tracked = self.sessions.entry(sid.to_owned()).or_default();
        let quiet_for = tracked.quiet_for(now_ms);
        if tracked.acknowledged {
            return self.view(sid, now, now_ms, "acknowledged idle".into());
        }
        if quiet_for < self.config.idle_after {
            return self.view(
                sid,
                now,
                now_ms,
                format!("idle ({idle_reason}), quiet for {}s", quiet_for.as_secs()),
            );
        }
        let next = self
            .config
            .schedule
            .next(&tracked.count, self.io.last_typed(sid));
        if tracked.retry_at.is_some_and(|at| at > now)
            && let Some(seen) = &tracked.screen_block
        {
            let reason = format!("{seen}, looking again later");
            return self.view(sid, now, now_ms, reason);
        }
        if !next.due(now) || tracked.retry_at.is_some_and(|at| at > now) {
            return self.view(
                sid,
                now,
                now_ms,
                format!("idle ({idle_reason}), backing off"),
            );
        }

        // About to type: look at the screen once, for a dialog or a change the cheap signals
        // cannot show.
        if let PaneTarget::Tmux { pane, .. } = target {
            match self.io.capture(pane).await {
                Ok(text) => {
                    if self.config.limits.enabled
                        && let Some(notice) = limits::on_screen(&text)
                    {
                        // Not a dialog to wait out: a limit, held from now on.
                        let seen =
                            LimitSeen::of_notice(sid, notice, LimitSource::Screen, now_ms, false);
                        tracing::info!(
                            session_id = sid,
                            kind = seen.kind,
                            "at its usage limit (seen on its screen); held"
                        );
                        self.io.record(vec![Record::Limited(seen)]).await;
                        return self.view(sid, now, now_ms, "limited (seen on screen)".into());
                    }
                    obs.screen = Some(screen::read(&text));
                }
                Err(error) => {
                    tracing::debug!(session_id = sid, "nudger: capture-pane failed: {error}");
                    return self.view(sid, now, now_ms, "screen unreadable".into());
                }
            }
            let movement = self.track(sid, &obs, now_ms, typed_ms, grace_ms);
            if let Movement::Real { signal, .. } = movement {
                self.answered(sid, signal).await;
                return self.view(sid, now, now_ms, format!("active ({signal})"));
            }
            let verdict = classify(&obs);
            if !matches!(verdict, Verdict::Idle(_)) {
                // Seen only on the screen (a dialog, a spinner): look again no sooner than a
                // base gap, so a long-open dialog costs one capture per gap, not one per poll.
                let base = self.config.schedule.base;
                let reason = verdict_text(&verdict);
                if let Some(tracked) = self.sessions.get_mut(sid) {
                    tracked.retry_at = Some(now + base);
                    tracked.screen_block = Some(reason.clone());
                }
                return self.view(sid, now, now_ms, reason);
            }
        }
        self.nudge(sid).await;
        self.view(
            sid,
            Instant::now(),
            self.io.now_ms(),
            format!("nudged ({idle_reason})"),
        )
    }

    /// Types the wake prompt into a session that is owed one once it has looked idle for
    /// `owed_after`. A busy marker contradicted by a current idle signal (the title's idle
    /// glyph, the registry's idle) counts as stale here: an Esc interrupt fires no hook, so its
    /// marker stays. `None` when the session does not look idle: the nudge path reports it.
    async fn pay_owed(
        &mut self,
        sid: &str,
        obs: &Observation,
        owed: Owed,
        now: Instant,
        now_ms: i64,
    ) -> Option<NudgeView> {
        let idle_now = obs.title == Some(Title::Idle)
            || obs
                .registry
                .as_ref()
                .is_some_and(|r| r.status == RegistryStatus::Idle);
        let stale_marker = obs.busy_marker && idle_now;
        let seen = Observation {
            busy_marker: obs.busy_marker && !stale_marker,
            ..obs.clone()
        };
        let Verdict::Idle(idle_reason) = classify(&seen) else {
            return None;
        };
        let tracked = self.sessions.entry(sid.to_owned()).or_default();
        let quiet_for = tracked.quiet_for(now_ms);
        let events = owed.events;
        if quiet_for < self.config.owed_after || tracked.owed_retry_at.is_some_and(|at| at > now) {
            let reason = format!("idle ({idle_reason}), owed {events} event(s)");
            return Some(self.view(sid, now, now_ms, reason));
        }
        let mode = if stale_marker {
            Mode::SeenIdle
        } else {
            Mode::Gated
        };
        let outcome = self.io.wake(sid, &KeystrokeText::wake_prompt(), mode).await;
        let done_ms = self.io.now_ms();
        let tracked = self.sessions.entry(sid.to_owned()).or_default();
        // A wake typed always ends a refusal streak, so its rows (with the wake) are due.
        let mut records = if row_due(&mut tracked.owed_refused, &outcome) {
            typed_records(OWED_SENDER, sid, done_ms, &outcome)
        } else {
            Vec::new()
        };
        let reason = if outcome.action.woke() {
            tracing::info!(
                session_id = sid,
                events,
                "typed the owed wake of an idle session"
            );
            records.push(Record::Pay {
                session_id: sid.to_owned(),
                up_to_ms: done_ms,
                how: Payment::Typed,
            });
            format!("paid an owed wake of {events} event(s) ({idle_reason})")
        } else {
            tracked.owed_retry_at = Some(Instant::now() + OWED_RETRY);
            format!(
                "owed {events} event(s), wake not typed ({})",
                outcome.action.as_str()
            )
        };
        self.io.record(records).await;
        Some(self.view(sid, Instant::now(), self.io.now_ms(), reason))
    }

    /// Feeds `obs` to the session's activity tracker.
    fn track(
        &mut self,
        sid: &str,
        obs: &Observation,
        now_ms: i64,
        typed_ms: Option<i64>,
        grace_ms: i64,
    ) -> Movement {
        let tracked = self.sessions.entry(sid.to_owned()).or_default();
        match &mut tracked.activity {
            Some(activity) => activity.observe(obs, now_ms, typed_ms, grace_ms),
            None => {
                let (activity, movement) =
                    Activity::first(obs, now_ms, tracked.restored_nudge_ms.take(), grace_ms);
                tracked.activity = Some(activity);
                movement
            }
        }
    }

    /// Real activity: forget the unanswered nudges.
    async fn answered(&mut self, sid: &str, signal: &str) {
        let tracked = self.sessions.entry(sid.to_owned()).or_default();
        let had = tracked.count.reset();
        let was_acknowledged = std::mem::replace(&mut tracked.acknowledged, false);
        tracked.retry_at = None;
        tracked.screen_block = None;
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
            let state = NudgeState {
                session_id: sid.to_owned(),
                unanswered: 0,
                last_nudge_ms: tracked.last_nudge_ms,
                acknowledged: false,
            };
            self.io.record(vec![Record::Nudge(state)]).await;
        }
    }

    async fn nudge(&mut self, sid: &str) {
        let unanswered = self
            .sessions
            .get(sid)
            .map_or(0, |tracked| tracked.count.unanswered);
        let Some(text) = self.config.message(unanswered).cloned() else {
            return;
        };
        let outcome = self.io.wake(sid, &text, Mode::Gated).await;
        let done_ms = self.io.now_ms();
        let mut records = vec![typed_row(
            DeliverySource::Nudge,
            NUDGER_SENDER,
            sid,
            done_ms,
            &outcome,
        )];
        let schedule = self.config.schedule;
        let base = schedule.base.max(STEP_FLOOR);
        let tracked = self.sessions.entry(sid.to_owned()).or_default();
        if outcome.action.woke() {
            tracked.count.nudged(Instant::now());
            tracked.last_nudge_ms = Some(done_ms);
            tracked.retry_at = None;
            tracked.screen_block = None;
            let acknowledged = schedule.acknowledged(tracked.count.unanswered);
            tracked.acknowledged = acknowledged;
            tracing::info!(
                session_id = sid,
                unanswered = tracked.count.unanswered,
                "nudged an idle session"
            );
            if acknowledged {
                tracing::info!(
                    session_id = sid,
                    unanswered = tracked.count.unanswered,
                    "session acknowledged idle: no more nudges until it shows activity"
                );
                self.io.notify(Notice::new(
                    sid,
                    NoticeKind::AcknowledgedIdle,
                    format!("{} nudges unanswered", tracked.count.unanswered),
                ));
            }
            records.push(Record::Nudge(NudgeState {
                session_id: sid.to_owned(),
                unanswered: tracked.count.unanswered,
                last_nudge_ms: Some(done_ms),
                acknowledged,
            }));
        } else {
            // Refused (busy marker, cooldown, stale pane) or failed: try again no sooner than
            // a base gap, so a broken pane costs one attempt per gap, not one per poll.
            tracked.retry_at = Some(Instant::now() + base);
            tracing::debug!(
                session_id = sid,
                action = outcome.action.as_str(),
                "nudge not typed"
            );
        }
        self.io.record(records).await;
    }

    fn view(&self, sid: &str, now: Instant, now_ms: i64, reason: String) -> NudgeView {
        let Some(tracked) = self.sessions.get(sid) else {
            return NudgeView {
                unanswered: 0,
                next_nudge_at_ms: None,
                acknowledged: false,
                idle_since_ms: None,
                last_reason: reason,
            };
        };
        let next_nudge_at_ms = match self
            .config
            .schedule
            .next(&tracked.count, self.io.last_typed(sid))
        {
            Next::At(at) => Some(ms_at(now, now_ms, at)),
            Next::Whenever | Next::Acknowledged => None,
        };
        let looks_idle = reason.starts_with("idle")
            || reason.starts_with("nudged")
            || reason.starts_with("owed")
            || reason.starts_with("acknowledged");
        NudgeView {
            unanswered: tracked.count.unanswered,
            next_nudge_at_ms: next_nudge_at_ms.filter(|_| !tracked.acknowledged),
            acknowledged: tracked.acknowledged,
            idle_since_ms: looks_idle
                .then(|| tracked.activity.as_ref().map(Activity::quiet_since_ms))
                .flatten(),
            last_reason: reason,
        }
    }
}

/// Whether an attempt to type gets a ledger row: every one that typed, and the first of a
/// streak of refusals with the same action (a draft left for an hour records one row, not one
/// per attempt). `last_refused` keeps the streak's action; typing ends the streak.
fn row_due(last_refused: &mut Option<Action>, outcome: &GateOutcome) -> bool {
    let refused = (!outcome.action.woke()).then_some(outcome.action);
    std::mem::replace(last_refused, refused) != refused || refused.is_none()
}

/// The ledger rows of what the loop typed (or tried to) at `at_ms`: the delivery row, and the
/// session's wake (the cooldown's start) when keystrokes reached the pane.
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

/// The ledger row of what the loop typed (or tried to) at `at_ms`.
fn typed_row(
    source: DeliverySource,
    sender: &str,
    sid: &str,
    at_ms: i64,
    outcome: &GateOutcome,
) -> Record {
    Record::Delivery(Delivery {
        at_ms,
        source,
        identity: None,
        event_id: None,
        sender: sender.to_owned(),
        target_session: sid.to_owned(),
        action: outcome.action.as_str().to_owned(),
        spool_us: None,
        inject_us: (!outcome.inject_time.is_zero())
            .then(|| u64::try_from(outcome.inject_time.as_micros()).unwrap_or(u64::MAX)),
        error_kind: outcome.error_kind.map(str::to_owned),
        owed: false,
    })
}

fn verdict_text(verdict: &Verdict) -> String {
    match verdict {
        Verdict::Idle(r) => format!("idle ({r})"),
        Verdict::Busy(r) => format!("busy ({r})"),
        Verdict::Blocked(r) => format!("blocked ({r})"),
        Verdict::Unknown(r) => format!("unknown ({r})"),
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The monotonic instant of wall time `ms`, given that `now` is `now_ms`; `None` if it lies
/// before the monotonic clock's origin. Future times map to `now`.
fn instant_at(now: Instant, now_ms: i64, ms: i64) -> Option<Instant> {
    let ago = u64::try_from(now_ms.saturating_sub(ms)).unwrap_or(0);
    now.checked_sub(Duration::from_millis(ago))
}

/// The wall time (unix ms) of monotonic `at`, given that `now` is `now_ms`.
fn ms_at(now: Instant, now_ms: i64, at: Instant) -> i64 {
    if at >= now {
        now_ms.saturating_add(millis(at - now))
    } else {
        now_ms.saturating_sub(millis(now - at))
    }
}

/// Runs the nudger until `shutdown`: restores state, then polls every `poll_interval` (every
/// [`OWED_POLL`] while a wake is owed, and at once when an event becomes owed).
pub async fn run(deps: NudgerDeps, shutdown: CancellationToken) {
    if !deps.config.enabled {
        tracing::info!("nudges off ([nudger] enabled = false); owed wakes are still typed");
    }
    let nudger = Nudger::new(deps.config, deps.io, deps.views);
    run_with(nudger, shutdown).await;
}

/// The loop around any [`NudgerIo`] (tests drive it with scripted signals and a paused clock).
pub async fn run_with<I: NudgerIo>(mut nudger: Nudger<I>, shutdown: CancellationToken) {
    nudger.restore().await;
    tracing::info!(
        idle_after_s = nudger.config.idle_after.as_secs(),
        poll_ms = millis(nudger.config.poll_interval),
        "idle nudger started"
    );
    loop {
        let started = Instant::now();
        // A poll is never cut short: dropping it mid-injection could leave a nudge typed but
        // not submitted. It is bounded by the snapshot, capture and injection budgets.
        nudger.poll().await;
        let interval = if nudger.owes_any {
            nudger.config.poll_interval.min(OWED_POLL)
        } else {
            nudger.config.poll_interval
        };
        let mut next_poll = started + interval;
        if let Some(due_ms) = nudger.resume_due_ms {
            // Measured from now (the poll took a while), not from the poll's start.
            let until_due = u64::try_from(due_ms - nudger.io.now_ms()).unwrap_or(0);
            next_poll =
                next_poll.min(Instant::now() + Duration::from_millis(until_due).max(STEP_FLOOR));
        }
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep_until(next_poll) => {}
            // A new owed event: poll now, and then every OWED_POLL.
            () = nudger.io.owed_noted() => {}
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
