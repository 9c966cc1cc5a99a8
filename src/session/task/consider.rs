//! Considering one session in a tick: how it can be reached, what the tick saw of it (its
//! pane's line of the snapshot, the busy marker, the hooks, the registry, the transcript), what
//! moved since the last look and whether that answers a nudge, the turn to charge, a usage limit
//! to tell a human of; then `session::decide`'s step, with the screen read first when it asks
//! for one. The step comes back to `tick` to be performed once every view is published.

use jiff::tz::TimeZone;
use tokio::time::Instant;

use super::{Keeper, ms_at};
use crate::api::SessionState;
use crate::budget::{self, policy};
use crate::clock::duration_ms;
use crate::mux::PaneInfo;
use crate::reading::screen::ScreenReading;
use crate::session::decide::{LOOK_EVERY_MS, Look, Now, Reach, Screen, Seen, Step, decide};
use crate::session::io::{SessionFacts, SessionIo};
use crate::session::observe::{Activity, Movement, Observation};
use crate::session::view;
use crate::telemetry::notice::{Notice, NoticeKind};
use crate::wakedir::target::PaneTarget;

impl<I: SessionIo> Keeper<I> {
    /// Looks at one session: what moved, the turn to charge, a limit to tell a human of, then
    /// the decision (with a screen read first when it asks for one). Its view shows the
    /// decision; the step comes back to be performed unless it is only a wait.
    pub(super) async fn consider(&mut self, sid: &str) -> Option<Step> {
        let facts = self.session(sid, |s| s.facts.clone());
        let target = self.around.mapping.get(sid).cloned();
        let now = Now {
            at: Instant::now(),
            ms: self.io.now_ms(),
            local: self.around.local.clone().unwrap_or_else(TimeZone::system),
        };
        let (reach, info) = self.reach(target.as_ref(), &facts);
        let side = facts.row.agent.side();
        let account = (facts.row.transcript_path.as_deref())
            .and_then(|p| side.account_of(std::path::Path::new(p)));
        let account = budget::of_account(&self.around.budgets, account.as_deref());
        let given = self.sessions.read(sid, |s| s.last_budget_ms).flatten();
        let outlook = policy::outlook(&self.config.budget, account, now.ms, given);
        let mut obs = Observation {
            busy_marker: self.io.busy(sid),
            title: info.as_ref().map(|info| side.read_title(&info.title)),
            window_activity_s: info.as_ref().and_then(|info| info.window_activity),
            screen: None,
            transcript: facts.transcript,
            hook: facts.hook(),
            registry: self.around.registry.get(sid).cloned(),
        };
        let typed = self.session(sid, |s| s.typing.at);
        let typed_ms = typed.map(|t| ms_at(now.at, now.ms, t));
        let limit = (facts.row.limit.clone()).filter(|_| self.config.limits.enabled);
        // With its pane gone from view, what moved is neither seen nor charged: a turn charged
        // before its answer is seen could not give that answer back. Nor is a person told of
        // the limit of a session that ended.
        if matches!(reach, Reach::Pane | Reach::Inbox) {
            if let Movement::Real { signal, at_ms } = self.track(sid, &obs, now.ms, typed_ms) {
                self.answered(sid, signal, at_ms).await;
            }
            self.charge(sid, &obs, &facts, now.ms).await;
            if let Some(limit) = limit.as_ref().filter(|_| facts.pause.is_none()) {
                self.tell_limit(sid, limit, &now);
            }
        }
        let pending = facts.rewind.pending.as_ref();
        let taken = pending.is_some_and(|p| self.rewind_taken(p));
        let kept = view::kept(&facts, self.config.keep);
        let mut read: Option<ScreenReading> = None;
        let mut looked = false;
        let step = loop {
            let screen = match (&read, looked) {
                (Some(read), _) => Screen::Read(read),
                (None, true) => Screen::Unreadable,
                (None, false) => Screen::NotRead,
            };
            let seen = Seen {
                reach,
                inbox: facts.inbox_live(),
                obs: &obs,
                screen,
                tmux: matches!(target, Some(PaneTarget::Tmux { .. })),
                owed: facts.row.owed,
                limit: limit.as_ref(),
                message_held: facts.message_held,
                rewind: pending,
                rewind_taken: taken,
                rewind_last_done_ms: facts.rewind.last_performed_ms,
                budget: outlook,
                paused: facts.pause.is_some(),
                kept,
                resumes_itself: side.resumes_at_the_reset(),
                failed_turn_heard: side.hook_ends_a_failed_turn(),
                not_rewound: side.not_rewound(),
            };
            let step = self.session(sid, |session| decide(session, &seen, &self.config, &now));
            // A screen read is asked for once: a second look is `perform`'s "screen read twice".
            let (&Step::Look(look), false) = (&step, looked) else {
                break step;
            };
            looked = true;
            if look == Look::WhileHeld {
                let next = now.ms.saturating_add(LOOK_EVERY_MS);
                self.session(sid, |s| s.limit_look_ms = Some(next));
            }
            let captured = self.look(sid, target.as_ref(), look).await;
            read = captured.map(|capture| side.read_screen(&capture));
            if look == Look::BeforeNudge {
                let Some(read) = &read else { continue };
                obs.screen = Some(read.clone());
                // The screen can show what the cheap signals cannot: a change since the last
                // look is the session at work.
                if let Movement::Real { signal, at_ms } = self.track(sid, &obs, now.ms, typed_ms) {
                    self.answered(sid, signal, at_ms).await;
                    let shown = (SessionState::Working, format!("active ({signal})"));
                    self.session(sid, |s| s.shown = shown);
                    return None;
                }
            }
        };
        let (shown, step) = match step {
            Step::Wait(state, reason) => ((state, reason), None),
            Step::WaitUntil(at_ms, state, reason) => {
                self.wake_at(at_ms);
                ((state, reason), None)
            }
            Step::Later(attempt, wait, state, reason) => {
                self.session(sid, |s| s.retry_in(attempt, now.at, wait));
                ((state, reason), None)
            }
            // What it showed before this step, until the step is performed.
            step => (self.session(sid, |s| s.shown.clone()), Some(step)),
        };
        self.session(sid, |s| s.shown = shown);
        step
    }

    /// How the session can be reached now, and its tmux pane's line of the snapshot.
    fn reach(
        &self,
        target: Option<&PaneTarget>,
        facts: &SessionFacts,
    ) -> (Reach, Option<PaneInfo>) {
        let Some(target) = target else {
            let reach = match facts.inbox_live() {
                true => Reach::Inbox,
                false if view::ended(&facts.row, false, self.io.now_ms()) => Reach::Ended,
                false => Reach::Unreachable,
            };
            return (reach, None);
        };
        let PaneTarget::Tmux { pane: id, .. } = target else {
            return (Reach::Pane, None);
        };
        let snapshot = self.around.snapshot.as_ref();
        let info = snapshot.and_then(|panes| panes.get(id)).cloned();
        let gone = |why, revive| Reach::Gone { why, revive };
        let reach = match (snapshot, &info) {
            (None, _) if self.around.tmux_gone => gone("tmux server gone", Some(false)),
            (None, _) => gone("tmux unavailable", None),
            (Some(_), None) => gone("pane not found", Some(false)),
            (_, Some(info)) if info.dead => gone("pane dead", Some(true)),
            (_, Some(_)) => Reach::Pane,
        };
        (reach, info)
    }

    /// Reads the screen: a tmux pane's by one `capture-pane` before a nudge, else through the
    /// gate.
    async fn look(&self, sid: &str, target: Option<&PaneTarget>, look: Look) -> Option<String> {
        match (look, target) {
            (Look::BeforeNudge, Some(PaneTarget::Tmux { pane, .. })) => {
                (self.io.capture(pane).await)
                    .inspect_err(|error| {
                        tracing::debug!(
                            session_id = sid,
                            "session loop: capture-pane failed: {error}"
                        );
                    })
                    .ok()
            }
            _ => self.io.screen(sid).await,
        }
    }

    /// Tells a human once of each usage limit, and wakes the loop for its resume.
    fn tell_limit(&mut self, sid: &str, limit: &crate::store::Limit, now: &Now) {
        let told = self.session(sid, |s| s.limit_told.replace(limit.since_ms));
        if told != Some(limit.since_ms) {
            let reset =
                crate::reading::limit::describe_reset(limit.resets_at_ms, now.ms, &now.local);
            self.io.notify(Notice::new(
                sid,
                NoticeKind::UsageLimit,
                format!("{}, {reset}", limit.kind),
            ));
        }
        if let Some(at) = crate::session::decide::resume_times(limit, &self.config, now.ms) {
            self.wake_at(at);
        }
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
}
