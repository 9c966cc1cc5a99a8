//! The wake gate: the one place that decides whether and how a session is told something, and the
//! one path that tells it. Nothing reaches a session a person paused (`spool-paused`, owed). Through the session's inbox where it has a live one (no pane needed, a
//! running turn no reason to wait: usage limit → cooldown → send); else typed: mapping → busy
//! marker → cooldown → stale-pane guard and typing. A prompt holding text, copy mode, a menu or a
//! usage limit hold a typed wake like a busy marker (`spool-busy`, owed). Slash commands and a
//! resume into a pane are always typed ([`by_inbox`] says why).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::claude::inbox::{self, Inbox};
use crate::claude::limits::{self, Notice};
use crate::claude::registry;
use crate::clock;
use crate::deadline::Deadline;
use crate::delivery::action::Action;
use crate::delivery::cooldown::Cooldown;
use crate::lock;
use crate::mux::{INJECT_BUDGET, InjectError, Injected, Injector, KeystrokeText};
use crate::store::{InboxRow, Limit, LimitSeen, LimitSource, Pause, Record, Store};
use crate::telemetry::notice::{self, NoticeKind, Notices};
use crate::telemetry::warn::Warnings;
use crate::wakedir::markers;
use crate::wakedir::reader::PanesReader;
use crate::wakedir::target::PaneTarget;
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
    pub target: Option<PaneTarget>,
}

impl GateOutcome {
    pub(crate) fn skipped(action: Action, target: Option<PaneTarget>) -> Self {
        Self {
            action,
            error_kind: None,
            inject_time: Duration::ZERO,
            target,
        }
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
    failures: Warnings,
    sessions: Mutex<HashMap<String, Typing>>,
    /// Rung when a bus event became owed a wake, so the session loop looks at once.
    owed: tokio::sync::Notify,
    store: Store,
    /// False: not even a notice on screen holds a wake back.
    hold_limits: bool,
    notices: Notices,
    /// Claude Code's session registry, where inboxes are looked up; `None`: never the inbox.
    inbox_registry: Option<PathBuf>,
}

/// One session's typing as the gate saw it (a wake that types clears both streaks).
#[derive(Debug, Default)]
struct Typing {
    /// When it was last typed into: the session loop spaces nudges by it and discounts the pane
    /// activity our own keystrokes cause.
    at: Option<Instant>,
    occupied: u32,
    failed: u32,
    /// The digests of the texts its inbox took within [`inbox::DUPLICATE_WINDOW`], and when.
    sent: Vec<(String, Instant)>,
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
    ) -> Self {
        Self {
            panes: PanesReader::new(&wake_dir),
            wake_dir,
            busy_ttl,
            cooldown: Cooldown::new(cooldown),
            injector,
            failures: Warnings::default(),
            sessions: Mutex::new(HashMap::new()),
            owed: tokio::sync::Notify::new(),
            store,
            hold_limits,
            notices: Notices::off(),
            inbox_registry: None,
        }
    }

    /// Tell sessions through their inboxes, looked up in the ledger (their hooks') and in the
    /// session registry `dir`.
    pub fn with_inboxes(mut self, dir: PathBuf) -> Self {
        self.inbox_registry = Some(dir);
        self
    }

    /// The pause a person put `sid` under, if any: nothing at all reaches it then. An unreadable
    /// ledger pauses nothing.
    pub fn paused(&self, sid: &str) -> Option<Pause> {
        self.store.pause(sid).ok().flatten()
    }

    pub fn inboxes_on(&self) -> bool {
        self.inbox_registry.is_some()
    }

    /// The inbox `sid` can be told through now: announced by its hook (else in the registry),
    /// a private socket of ours whose process is alive and runs `sid` as far as the registry
    /// says. `None` with inboxes off.
    pub fn inbox(&self, sid: &str) -> Option<Inbox> {
        let dir = self.inbox_registry.as_deref()?;
        let row = self.store.inbox(sid).ok().flatten();
        let unheard = row
            .as_ref()
            .and_then(InboxRow::unanswered_since)
            .filter(|&sent| {
                clock::now_ms().saturating_sub(sent) >= duration_ms(inbox::UNHEARD_AFTER)
            });
        if unheard.is_some() && !self.message_held(sid) {
            tracing::debug!(
                session_id = sid,
                "its inbox left the last message unheard; not used"
            );
            return None;
        }
        let announced = row.and_then(|row| row.inbox);
        let inbox = announced.or_else(|| registry::inbox_of(dir, sid))?;
        let checked = inbox.check().and_then(|()| match inbox.pid {
            // A pid is reused: its socket path then belongs to another session.
            Some(pid) => match registry::session_of_pid(dir, pid) {
                Some(other) if other != sid => Err(inbox::InboxError::DeadProcess(pid)),
                _ => Ok(()),
            },
            None => Ok(()),
        });
        match checked {
            Ok(()) => Some(inbox),
            Err(error) => {
                tracing::debug!(session_id = sid, %error, "inbox not usable");
                None
            }
        }
    }

    pub fn with_notices(mut self, notices: Notices) -> Self {
        self.notices = notices;
        self
    }

    pub fn notices(&self) -> &Notices {
        &self.notices
    }

    pub fn limits_enabled(&self) -> bool {
        self.hold_limits
    }

    /// An unreadable ledger holds nothing; the screen check still stands.
    pub fn held_at(&self, sid: &str) -> Option<Limit> {
        if !self.hold_limits {
            return None;
        }
        self.store.limit(sid).ok().flatten()
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

    pub fn note_owed(&self) {
        self.owed.notify_one();
    }

    pub async fn owed_noted(&self) {
        self.owed.notified().await;
    }

    pub fn cooldown(&self) -> &Cooldown {
        &self.cooldown
    }

    pub fn injector(&self) -> &Arc<Injector> {
        &self.injector
    }

    pub fn last_typed(&self, sid: &str) -> Option<Instant> {
        lock(&self.sessions).get(sid).and_then(|t| t.at)
    }

    fn typing<T>(&self, sid: &str, change: impl FnOnce(&mut Typing) -> T) -> T {
        change(lock(&self.sessions).entry(sid.to_owned()).or_default())
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
        if self.paused(sid).is_some() {
            tracing::debug!(session_id = sid, "session paused; spooled only");
            return GateOutcome::skipped(Action::SpoolPaused, resolved.target.clone());
        }
        if by_inbox(text, mode, resolved.target.is_some())
            && let Some(inbox) = self.inbox(sid)
            && let Some(outcome) = self.send(sid, &inbox, text, mode, &resolved.target).await
        {
            return outcome;
        }
        let Some(target) = resolved.target.clone() else {
            tracing::debug!(session_id = sid, "no pane mapped; spooled only");
            return GateOutcome::skipped(Action::SpoolUnmapped, None);
        };
        if mode != Mode::Resume
            && let Some(limit) = self.held_at(sid)
        {
            tracing::debug!(
                session_id = sid,
                kind = limit.kind,
                "session held at its usage limit; spooled only"
            );
            return GateOutcome::skipped(Action::SpoolBusy, Some(target));
        }
        let busy_before = self.is_busy(sid);
        if matches!(mode, Mode::Gated | Mode::Resume) && busy_before {
            tracing::debug!(
                session_id = sid,
                "session busy (fresh marker); spooled only"
            );
            return GateOutcome::skipped(Action::SpoolBusy, Some(target));
        }
        let reservation = match mode {
            Mode::Forced => self.cooldown.force(sid),
            Mode::Gated | Mode::SeenIdle | Mode::Resume => match self.cooldown.reserve(sid) {
                Some(r) => r,
                None => {
                    tracing::debug!(
                        session_id = sid,
                        "Cooldown active for {}; spooled only",
                        short(sid)
                    );
                    return GateOutcome::skipped(Action::SpoolCooldown, Some(target));
                }
            },
        };
        let started = Instant::now();
        let unheld = (!self.hold_limits).then(|| text.clone().over_limits());
        let text = unheld.as_ref().unwrap_or(text);
        let result = self
            .injector
            .inject(&target, text, Deadline::after(INJECT_BUDGET))
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
                Ok(Injected {
                    mux: target.mux_name(),
                    elapsed: inject_time,
                })
            }
            other => other,
        };
        let (action, error_kind) = match result {
            Ok(injected) => {
                // The inbox's recent texts stay: Claude Code's duplicate window outlives a
                // typed wake.
                self.typing(sid, |t| {
                    (t.at, t.occupied, t.failed) = (Some(Instant::now()), 0, 0);
                });
                tracing::info!(
                    session_id = sid,
                    mux = injected.mux,
                    elapsed_ms = inject_time.as_millis() as u64,
                    "Woke {} via {target}",
                    short(sid)
                );
                self.failures.clear_prefix(&format!("{sid}:"));
                (injected.mux.parse().unwrap_or(Action::Tmux), None)
            }
            Err(held @ (InjectError::Occupied | InjectError::Held(_))) => {
                // Not a failure: like a fresh busy marker, the event is owed and the cooldown is
                // left for the real wake.
                self.cooldown.roll_back(sid, reservation);
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
                self.cooldown.roll_back(sid, reservation);
                tracing::info!(
                    session_id = sid,
                    kind = notice.kind,
                    resets = notice.resets.as_deref().unwrap_or("?"),
                    "{} is at its usage limit (seen on its screen); held, spooled only",
                    short(sid)
                );
                self.note_limit(sid, notice).await;
                (Action::SpoolBusy, None)
            }
            Err(error) => {
                self.cooldown.roll_back(sid, reservation);
                let kind = error.kind();
                crate::telemetry::error(kind);
                let first = self.failures.first(&format!("{sid}:{kind}"));
                if first {
                    tracing::warn!(
                        session_id = sid,
                        kind,
                        "Wake injection failed for {} ({error}); spooled only",
                        short(sid)
                    );
                } else {
                    tracing::debug!(
                        session_id = sid,
                        kind,
                        "Wake injection failed for {} ({error}); spooled only",
                        short(sid)
                    );
                }
                let in_a_row = self.typing(sid, |t| {
                    t.failed += 1;
                    t.failed
                });
                if in_a_row == FAILURES_NOTIFIED {
                    self.notices.send(notice::Notice::new(
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
            target: Some(target),
        }
    }

    /// Whether Claude Code holds the last message sent to `sid`'s inbox for a human (bypass mode
    /// without `crossSessionInbound: accept`): its transcript says so, and nothing answered it.
    pub fn message_held(&self, sid: &str) -> bool {
        let Some(since) = (self.store.inbox(sid).ok().flatten()).and_then(|r| r.unanswered_since())
        else {
            return false;
        };
        let transcript = self
            .store
            .session(sid)
            .ok()
            .flatten()
            .and_then(|r| r.transcript_path);
        transcript
            .is_some_and(|path| inbox::held_since(&inbox::transcript_tail(Path::new(&path)), since))
    }

    /// Tells `sid` through its inbox; `None` when that failed and it has a pane to type into.
    async fn send(
        &self,
        sid: &str,
        inbox: &Inbox,
        text: &KeystrokeText,
        mode: Mode,
        target: &Option<PaneTarget>,
    ) -> Option<GateOutcome> {
        let skipped = |action| Some(GateOutcome::skipped(action, target.clone()));
        if mode != Mode::Resume && self.held_at(sid).is_some() {
            tracing::debug!(
                session_id = sid,
                "session held at its usage limit; spooled only"
            );
            return skipped(Action::SpoolBusy);
        }
        if self.message_held(sid) {
            // Neither sent again (one more to answer) nor typed (into the Deny/Deliver dialog).
            tracing::debug!(
                session_id = sid,
                "its last message waits for a human; spooled only"
            );
            return skipped(Action::SpoolBusy);
        }
        // A running turn is no reason to wait: the inbox hands the message over between tool
        // calls, and a draft or a dialog on screen is never touched.
        let reservation = match mode {
            Mode::Forced => self.cooldown.force(sid),
            _ => match self.cooldown.reserve(sid) {
                Some(r) => r,
                None => return skipped(Action::SpoolCooldown),
            },
        };
        let text = self.typing(sid, |t| {
            t.sent
                .retain(|(_, at)| at.elapsed() < inbox::DUPLICATE_WINDOW);
            unrepeated(text.as_str(), &t.sent)
        });
        let digest = inbox::digest(&text);
        let (started, began_ms) = (Instant::now(), clock::now_ms());
        match inbox.send(&text, Deadline::after(INJECT_BUDGET)).await {
            Ok(()) => {
                let now = Instant::now();
                self.typing(sid, |t| {
                    t.sent.push((digest.clone(), now));
                    (t.at, t.occupied, t.failed) = (Some(now), 0, 0);
                });
                self.failures.clear_prefix(&format!("{sid}:"));
                let sent = Record::InboxSent {
                    session_id: sid.to_owned(),
                    digest,
                    at_ms: began_ms,
                };
                if let Err(e) = self.store.record_queued(sent) {
                    tracing::warn!(error = %e, "could not record an inbox message in the ledger");
                }
                tracing::info!(session_id = sid, "Woke {} through its inbox", short(sid));
                Some(GateOutcome {
                    action: Action::Inbox,
                    error_kind: None,
                    inject_time: started.elapsed(),
                    target: target.clone(),
                })
            }
            Err(error) => {
                self.cooldown.roll_back(sid, reservation);
                let kind = error.kind();
                crate::telemetry::error(kind);
                let fallback = if target.is_some() {
                    "typed instead"
                } else {
                    "spooled only"
                };
                if self.failures.first(&format!("{sid}:{kind}")) {
                    tracing::warn!(
                        session_id = sid,
                        kind,
                        "Inbox of {} failed ({error}); {fallback}",
                        short(sid)
                    );
                } else {
                    tracing::debug!(
                        session_id = sid,
                        kind,
                        "Inbox of {} failed ({error}); {fallback}",
                        short(sid)
                    );
                }
                target.is_none().then(|| GateOutcome {
                    action: Action::SpoolMuxFailed,
                    error_kind: Some(kind),
                    inject_time: started.elapsed(),
                    target: None,
                })
            }
        }
    }

    /// Picks the limit menu's wait option if the menu is on `sid`'s screen (`Ok(false)`: not).
    pub async fn dismiss_limit_menu(&self, sid: &str) -> Result<bool, InjectError> {
        let Some(target) = self
            .panes
            .lookup(sid)
            .filter(|_| self.paused(sid).is_none())
        else {
            return Ok(false);
        };
        self.injector
            .pick(&target, limits::wait_option, Deadline::after(INJECT_BUDGET))
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

    async fn note_limit(&self, sid: &str, notice: Notice) {
        if !self.hold_limits {
            return;
        }
        let seen = LimitSeen::of_notice(sid, notice, LimitSource::Screen, clock::now_ms(), false);
        if let Err(e) = self.store.record(Record::Limited(seen)).await {
            tracing::warn!(error = %e, "could not record a usage limit in the ledger");
        }
    }
}

/// Whether `text` may go through the session's inbox rather than be typed. Slash commands
/// never: the inbox hands them to the model as text. Nor a resume at a usage limit where there
/// is a pane: an inbox message leaves Claude Code's own pending auto-continue armed and its
/// "Usage limit reached · Continuing shortly" banner up (seen on 2.1.332), where a typed prompt
/// cancels both.
fn by_inbox(text: &KeystrokeText, mode: Mode, has_pane: bool) -> bool {
    let typed_only = text.as_str().starts_with('/') || (mode == Mode::Resume && has_pane);
    !typed_only
}

/// `text`, numbered (`… (#2)`) if it went to the same inbox within Claude Code's duplicate
/// window: Claude Code drops a repeat from the same sender then without a word, and a second
/// bus event during a turn is news the first message did not carry. Ends: one of the first
/// `recent.len() + 1` numbers is free.
fn unrepeated(text: &str, recent: &[(String, Instant)]) -> String {
    let mut n = 1;
    loop {
        let candidate = match n {
            1 => text.to_owned(),
            n => format!("{text} (#{n})"),
        };
        if !recent.iter().any(|(d, _)| *d == inbox::digest(&candidate)) {
            return candidate;
        }
        n += 1;
    }
}

fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
