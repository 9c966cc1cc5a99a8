//! The wake gate: the one place that decides whether and how a session is told something, and the
//! one path that tells it. Nothing reaches a session a person paused (`spool-paused`, owed).
//! Through the session's inbox where it has a live one (no pane needed, a running turn no reason
//! to wait: usage limit → cooldown → send); else typed: mapping → busy marker → cooldown →
//! stale-pane guard and typing. A prompt holding text, copy mode, a menu or a usage limit hold a
//! typed wake like a busy marker (`spool-busy`, owed). Slash commands and a resume into a pane
//! are always typed (`decide::route` says why). A failure warns the first time for its key,
//! until a wake clears the session's keys.

mod inbox_path;

pub use inbox_path::Unusable;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::api::Action;
use crate::clock;
use crate::deadline::Deadline;
use crate::mux::{INJECT_BUDGET, InjectError, Injector, KeystrokeText};
use crate::reading::registry::SessionList;
use crate::session::Sessions;
use crate::session::cooldown::{Cooldown, Reservation};
use crate::session::decide::route::{Told, route};
use crate::session::io::SessionFacts;
use crate::session::state::Typing;
use crate::store::{
    Delivery, DeliverySource, LimitSeen, LimitSource, Pause, Payment, Record, RewindFacts, Store,
};
use crate::telemetry::notice::{self, NoticeKind, Notices};
use crate::wakedir::markers;
use crate::wakedir::reader::PanesReader;
use crate::wakedir::target::PaneTarget;
use crate::wire::event::Event;
use crate::wire::session_id::short;

/// Wakes in a row held back by text at the prompt after which it is a WARN: probably not a draft.
const OCCUPIED_WARN_AFTER: u32 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Respect busy markers and the cooldown (bus events, nudges, warnings).
    Gated,
    /// Skip busy markers and the cooldown (never the mapping, stale-pane or prompt checks).
    Forced,
    /// Skip the busy marker, keep the cooldown: the caller saw the session idle although the
    /// marker says a turn runs (an Esc interrupt fires no hook).
    SeenIdle,
    /// The resume message at a usage limit's reset: like `Gated`, and through the hold.
    Resume,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateOutcome {
    pub action: Action,
    pub error_kind: Option<&'static str>,
    pub inject_time: Duration,
}

impl GateOutcome {
    pub(crate) fn skipped(action: Action) -> Self {
        Self {
            action,
            error_kind: None,
            inject_time: Duration::ZERO,
        }
    }

    /// Nothing typed or sent, for the reason `why` (logged at debug).
    fn spooled(sid: &str, action: Action, why: &str) -> Self {
        tracing::debug!(session_id = sid, "{why}; spooled only");
        Self::skipped(action)
    }

    /// Typed, but still on the prompt line: the next attempt submits it rather than types it
    /// again.
    pub fn unsubmitted(&self) -> bool {
        self.error_kind == Some(InjectError::Unsubmitted.into())
    }

    /// Failed in a way the next attempt cannot mend within seconds: a multiplexer or an inbox
    /// that erred, a pane gone. Not a busy or cooldown refusal, nor text left unsubmitted.
    pub fn failed(&self) -> bool {
        let failure = matches!(
            self.action,
            Action::SpoolMuxFailed | Action::SpoolStalePane | Action::SpoolUnmapped
        );
        failure && !self.unsubmitted()
    }
}

/// A session id as the gate will act on it: the id it goes by now, and its pane if mapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved<'a> {
    pub session_id: std::borrow::Cow<'a, str>,
    pub target: Option<PaneTarget>,
}

pub struct Gate {
    wake_dir: PathBuf,
    panes: PanesReader,
    busy_ttl: f64,
    cooldown: Cooldown,
    injector: Arc<Injector>,
    /// Where each session's cooldown and typing record are kept.
    sessions: Arc<Sessions>,
    store: Store,
    /// False: not even a notice on screen holds a wake back.
    hold_limits: bool,
    notices: Notices,
    /// `[notify] min_gap`: one notice of a kind per session within it.
    notice_gap: Duration,
    /// Sessions are told through their inboxes (`[wake] inbox`).
    inboxes: bool,
    /// The agent's list of live sessions, where an inbox no hook announced is looked up.
    registry: Option<Arc<dyn SessionList>>,
}

/// Failed wakes in a row after which a human is told: one is often a moment, three need someone.
pub const FAILURES_NOTIFIED: u32 = 3;

impl Gate {
    pub fn new(
        wake_dir: PathBuf,
        busy_ttl: f64,
        cooldown: Duration,
        injector: Arc<Injector>,
        store: Store,
        hold_limits: bool,
        sessions: Arc<Sessions>,
    ) -> Self {
        Self {
            panes: PanesReader::new(&wake_dir),
            wake_dir,
            busy_ttl,
            cooldown: Cooldown::new(cooldown),
            injector,
            sessions,
            store,
            hold_limits,
            notices: Notices::default(),
            notice_gap: Duration::ZERO,
            inboxes: false,
            registry: None,
        }
    }

    /// Tells a human through `notices`, one notice of a kind per session within `gap`.
    pub fn with_notices(mut self, notices: Notices, gap: Duration) -> Self {
        (self.notices, self.notice_gap) = (notices, gap);
        self
    }

    /// Tells a human `notice`, unless its session was told one of its kind within `[notify]
    /// min_gap` (the session's value keeps when; the hourly cap is the sender's).
    pub fn notify(&self, notice: notice::Notice) {
        let now = Instant::now();
        let gap = self.notice_gap;
        let due = self.sessions.with(&notice.session_id, |s| {
            let due = (s.notified.get(&notice.kind)).is_none_or(|at| now - *at >= gap);
            if due {
                s.notified.insert(notice.kind, now);
            }
            due
        });
        match due {
            true => self.notices.send(notice),
            false => crate::telemetry::notice_outcome(notice::NoticeOutcome::Limited),
        }
    }

    /// What the gate decides a wake by, for `sid`, read from the ledger now: a hook's limit, an
    /// answer to a sent message and a person's pause are written by other processes, and a wake
    /// must not act on the loop's look of a second ago. An unreadable ledger pauses and holds
    /// nothing; the screen check still stands.
    fn facts(&self, sid: &str) -> (SessionFacts, Option<Pause>) {
        let pause = self.store.pause(sid).ok().flatten();
        let mut row = self.store.session(sid).ok().flatten().unwrap_or_default();
        row.session_id = sid.to_owned();
        // The registry is the inbox's second source, looked through only when no hook named one.
        let announced = (row.inbox.as_ref()).is_some_and(|r| r.inbox.is_some());
        let registry = self.registry.as_deref().filter(|_| !announced);
        let registered = registry.and_then(|list| list.inbox_of(sid));
        let facts = super::io::facts_of(row, RewindFacts::default(), pause, self, registered);
        (facts, pause)
    }

    /// The id `sid` goes by now and its pane: itself, unless it is unmapped and was given up at a
    /// `/clear` for an id still mapped to the same pane. Peers keep using the old id; everything
    /// done for it is done for the current one.
    pub fn resolve<'a>(&self, sid: &'a str) -> Resolved<'a> {
        let target = self.panes.lookup(sid);
        if target.is_none()
            && let Ok(Some((newest, pane))) = self.store.successor(sid)
            && let Some(target) = self.panes.lookup(&newest)
            && target.to_string() == pane
        {
            return Resolved {
                session_id: newest.into(),
                target: Some(target),
            };
        }
        Resolved {
            session_id: sid.into(),
            target,
        }
    }

    /// How long until `sid` may be woken again (zero when it may now).
    pub fn cooldown_remaining(&self, sid: &str) -> Duration {
        let woken = self.sessions.read(sid, |s| s.typing.woken).flatten();
        self.cooldown.remaining(&woken)
    }

    /// Restores a wake of `sid` that happened `ago` before now (from the ledger, at start).
    pub fn restore_wake(&self, sid: &str, ago: Duration) {
        self.typing(sid, |t| self.cooldown.restore(&mut t.woken, ago));
    }

    /// Reserves `sid`'s next wake now, or `None` while its cooldown runs (`forced`: regardless).
    fn reserve(&self, sid: &str, forced: bool) -> Option<Reservation> {
        self.typing(sid, |t| self.cooldown.reserve(&mut t.woken, forced))
    }

    fn roll_back(&self, sid: &str, reservation: Reservation) {
        self.typing(sid, |t| Cooldown::roll_back(&mut t.woken, reservation));
    }

    /// Whether the failure `kind` of `sid` is warned now: the first time since its last wake.
    fn first_failure(&self, sid: &str, kind: &'static str) -> bool {
        self.typing(sid, |t| t.warned.insert(kind))
    }

    /// The table of sessions the gate keeps its records in.
    pub fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    pub fn injector(&self) -> &Arc<Injector> {
        &self.injector
    }

    pub fn last_typed(&self, sid: &str) -> Option<Instant> {
        self.sessions.read(sid, |s| s.typing.at).flatten()
    }

    fn typing<T>(&self, sid: &str, change: impl FnOnce(&mut Typing) -> T) -> T {
        self.sessions.with(sid, |s| change(&mut s.typing))
    }

    /// A wake went in at `at`: both streaks and the session's failure warnings end.
    fn woke(&self, sid: &str, at: Instant) {
        self.typing(sid, |t| {
            (t.at, t.occupied, t.failed) = (Some(at), 0, 0);
            t.warned.clear();
        });
    }

    pub fn is_busy(&self, sid: &str) -> bool {
        markers::is_busy(&self.wake_dir, sid, self.busy_ttl)
    }

    pub async fn wake(&self, sid: &str, text: &KeystrokeText, mode: Mode) -> GateOutcome {
        self.wake_resolved(&self.resolve(sid), text, mode).await
    }

    pub async fn wake_resolved(
        &self,
        resolved: &Resolved<'_>,
        text: &KeystrokeText,
        mode: Mode,
    ) -> GateOutcome {
        let sid: &str = &resolved.session_id;
        let (facts, pause) = self.facts(sid);
        let busy_before = self.is_busy(sid);
        let told = Told {
            text,
            mode,
            pane: resolved.target.as_ref(),
            inbox: facts.inbox.as_ref().ok().and_then(Option::as_ref),
            paused: pause.is_some(),
            limited: self.hold_limits && facts.row.limit.is_some(),
            message_held: facts.message_held,
            busy: busy_before,
            screen_shows_turns: facts.row.agent.side().prompt().shows_every_turn,
        };
        let route = match route(&told) {
            Ok(route) => route,
            Err(action) => return GateOutcome::spooled(sid, action, "not told now"),
        };
        if let Some(inbox) = &route.inbox {
            let has_pane = resolved.target.is_some();
            if let Some(outcome) = self.send(sid, inbox, text, mode, has_pane).await {
                return outcome;
            }
        }
        let target = match route.typed {
            Ok(target) => target,
            Err(action) => return GateOutcome::spooled(sid, action, "not typed now"),
        };
        let side = facts.row.agent.side();
        let transcript = facts.row.transcript_path.as_deref().map(Path::new);
        let holder = match (side.pane_holds_its_transcript(), transcript) {
            (false, _) => None,
            (true, Some(transcript)) => Some(transcript),
            (true, None) => {
                let why = "no transcript yet to tell its pane by";
                return GateOutcome::spooled(sid, Action::SpoolStalePane, why);
            }
        };
        let Some(reservation) = self.reserve(sid, mode == Mode::Forced) else {
            let why = format!("Cooldown active for {}", short(sid));
            return GateOutcome::spooled(sid, Action::SpoolCooldown, &why);
        };
        let started = Instant::now();
        let unheld = (!self.hold_limits).then(|| text.clone().over_limits());
        let text = unheld.as_ref().unwrap_or(text);
        let result = self
            .injector
            .inject(
                &side.prompt(),
                holder,
                &target,
                text,
                Deadline::after(INJECT_BUDGET),
            )
            .await;
        let inject_time = started.elapsed();
        let result = match result {
            // The text stayed on the prompt line, yet the hook marked a turn started meanwhile:
            // the Enter was taken and the TUI had not redrawn yet.
            Err(InjectError::Unsubmitted) if !busy_before && self.is_busy(sid) => {
                tracing::debug!(
                    session_id = sid,
                    "the prompt line still showed the text, but the busy marker says the turn started"
                );
                Ok(target.mux_name())
            }
            other => other,
        };
        let (action, error_kind) = match result {
            Ok(mux) => {
                // The inbox's recent texts stay: Claude Code's duplicate window outlives a
                // typed wake.
                self.woke(sid, Instant::now());
                tracing::info!(
                    session_id = sid,
                    mux,
                    elapsed_ms = inject_time.as_millis() as u64,
                    "Woke {} via {target}",
                    short(sid)
                );
                (mux.parse().unwrap_or(Action::Tmux), None)
            }
            Err(held @ (InjectError::Occupied | InjectError::Held(_))) => {
                // Not a failure: like a fresh busy marker, the event is owed and the cooldown is
                // left for the real wake.
                self.roll_back(sid, reservation);
                let times = self.typing(sid, |t| {
                    t.occupied += 1;
                    t.occupied
                });
                if times == OCCUPIED_WARN_AFTER {
                    tracing::warn!(
                        session_id = sid,
                        "{} has been held through {times} wakes in a row ({held}); if nobody is there, clear its prompt or leave the menu or copy mode (a placeholder wakebridge does not know reads as typed text)",
                        short(sid)
                    );
                } else {
                    tracing::info!(session_id = sid, "{}: {held}; spooled only", short(sid));
                }
                (Action::SpoolBusy, None)
            }
            Err(InjectError::Limited(notice)) => {
                self.roll_back(sid, reservation);
                tracing::info!(
                    session_id = sid,
                    kind = notice.kind,
                    resets = notice.resets.as_deref().unwrap_or("?"),
                    "{} is at its usage limit (seen on its screen); held, spooled only",
                    short(sid)
                );
                // Reached only while limits hold: with them off the text is typed `over_limits`,
                // which never stops at a limit.
                let at_ms = clock::now_ms();
                let seen = LimitSeen::of_notice(sid, notice, LimitSource::Screen, at_ms, false);
                if let Err(e) = self.store.record(Record::Limited(seen)).await {
                    tracing::warn!(error = %e, "could not record a usage limit in the ledger");
                }
                (Action::SpoolBusy, None)
            }
            Err(error) => {
                self.roll_back(sid, reservation);
                let kind = error.kind();
                crate::telemetry::error(kind);
                crate::warn_or_debug!(
                    self.first_failure(sid, kind),
                    session_id = sid,
                    kind,
                    "Wake injection failed for {} ({error}); spooled only",
                    short(sid)
                );
                let in_a_row = self.typing(sid, |t| {
                    t.failed += 1;
                    t.failed
                });
                if in_a_row == FAILURES_NOTIFIED {
                    self.notify(notice::Notice::new(
                        sid,
                        NoticeKind::WakeFailing,
                        format!("last: {error}"),
                    ));
                }
                let action = match error {
                    InjectError::StalePane { .. } => Action::SpoolStalePane,
                    _ => Action::SpoolMuxFailed,
                };
                (action, Some(kind))
            }
        };
        GateOutcome {
            action,
            error_kind,
            inject_time,
        }
    }

    /// Picks the limit menu's wait option if the menu is on `sid`'s screen (`Ok(false)`: not,
    /// or its agent has no such menu).
    pub async fn dismiss_limit_menu(&self, sid: &str) -> Result<bool, InjectError> {
        let row = self.store.session(sid).ok().flatten();
        let agent = row.map(|row| row.agent).unwrap_or_default();
        let Some(locate) = agent.side().limit_menu_wait() else {
            return Ok(false);
        };
        let Some(target) = self
            .panes
            .lookup(sid)
            .filter(|_| self.store.pause(sid).ok().flatten().is_none())
        else {
            return Ok(false);
        };
        self.injector
            .pick(&target, locate, Deadline::after(INJECT_BUDGET))
            .await
    }

    pub async fn screen(&self, sid: &str) -> Option<String> {
        let target = self.panes.lookup(sid)?;
        self.injector
            .screen(&target, Deadline::after(INJECT_BUDGET))
            .await
            .ok()
            .flatten()
    }
}

/// A delivery row as it starts: who, what, for whom, and the action so far.
pub(crate) fn delivery_row(
    source: DeliverySource,
    event: Option<&Event>,
    sid: &str,
    action: Action,
) -> Delivery {
    Delivery {
        at_ms: clock::now_ms(),
        source,
        identity: event.map(|e| e.identity.clone()),
        event_id: event.and_then(|e| e.event_id.clone()),
        sender: event
            .and_then(|e| e.sender.clone())
            .unwrap_or_else(|| source.as_str().to_string()),
        target_session: sid.to_string(),
        action: action.as_str().to_string(),
        spool_us: None,
        inject_us: None,
        error_kind: None,
        owed: false,
    }
}

/// How a wake that woke pays: by the inbox or by typing.
pub(crate) fn paid_by(action: Action) -> Payment {
    match action {
        Action::Inbox => Payment::Inbox,
        _ => Payment::Typed,
    }
}

pub(crate) fn inject_us(outcome: &GateOutcome) -> Option<u64> {
    (!outcome.inject_time.is_zero()).then(|| micros(outcome.inject_time))
}

pub(crate) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_left_unsubmitted_is_no_failure_to_wait_out() {
        let outcome = |action, error_kind| GateOutcome {
            action,
            error_kind,
            inject_time: Duration::ZERO,
        };
        let unsubmitted = outcome(Action::SpoolMuxFailed, Some("unsubmitted"));
        assert!(unsubmitted.unsubmitted() && !unsubmitted.failed());
        assert!(outcome(Action::SpoolMuxFailed, Some("inbox-refused")).failed());
        assert!(outcome(Action::SpoolStalePane, Some("stale")).failed());
        assert!(!outcome(Action::SpoolBusy, None).failed());
        assert!(!outcome(Action::SpoolCooldown, None).failed());
    }

    #[tokio::test(start_paused = true)]
    async fn one_notice_of_a_kind_per_session_within_the_gap() {
        let store = Store::open_in_memory().unwrap();
        let injector = Arc::new(Injector::new(&crate::mux::MuxConfig::default()));
        let (notices, mut sent) = Notices::channel();
        let gap = Duration::from_secs(900);
        let wake_dir = PathBuf::from("/nonexistent-wake-dir");
        let gate = Gate::new(
            wake_dir,
            3600.0,
            Duration::ZERO,
            injector,
            store,
            true,
            Arc::default(),
        )
        .with_notices(notices, gap);
        let told = |sid: &str, kind| gate.notify(notice::Notice::new(sid, kind, ""));
        told("a", NoticeKind::UsageLimit);
        told("a", NoticeKind::UsageLimit);
        told("a", NoticeKind::Resumed);
        told("b", NoticeKind::UsageLimit);
        tokio::time::advance(gap).await;
        told("a", NoticeKind::UsageLimit);
        let mut kinds = Vec::new();
        while let Ok(n) = sent.try_recv() {
            kinds.push((n.session_id, n.kind));
        }
        let a = |kind| ("a".to_owned(), kind);
        let expected = [
            a(NoticeKind::UsageLimit),
            a(NoticeKind::Resumed),
            ("b".to_owned(), NoticeKind::UsageLimit),
            a(NoticeKind::UsageLimit),
        ];
        assert_eq!(kinds, expected);
    }

    #[tokio::test]
    async fn a_limit_a_hook_just_recorded_holds_the_next_wake_whatever_the_loop_last_saw() {
        let store = Store::open_in_memory().unwrap();
        let wake_dir = tempfile::tempdir().unwrap();
        let panes = r#"{"a": {"mux": "tmux", "pane": "%3"}}"#;
        std::fs::write(wake_dir.path().join("panes.json"), panes).unwrap();
        let sessions = Arc::new(Sessions::default());
        // The loop took "a" up before the limit: its value's facts show none.
        sessions.with("a", |s| s.entered = true);
        let injector = Arc::new(Injector::new(&crate::mux::MuxConfig::default()));
        let gate = Gate::new(
            wake_dir.path().to_owned(),
            3600.0,
            Duration::ZERO,
            injector,
            store.clone(),
            true,
            sessions,
        );
        let notice = crate::reading::limit::Notice {
            kind: "session limit".into(),
            resets: Some("in 2h".into()),
        };
        let now_ms = clock::now_ms();
        let seen = LimitSeen::of_notice("a", notice, LimitSource::Hook, now_ms, true);
        store.record(Record::Limited(seen)).await.unwrap();
        let text = KeystrokeText::new("peer message").unwrap();
        let outcome = gate.wake("a", &text, Mode::Gated).await;
        assert_eq!(outcome.action, Action::SpoolBusy, "{outcome:?}");
    }
}
