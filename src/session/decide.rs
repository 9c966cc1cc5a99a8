//! The one decision per session and poll, pure: the session's value, what the poll saw and the
//! time in, the next [`Step`] out, with the state it shows. Precedence: a session that ended or
//! that nothing reaches, a pane that is gone, a person's pause, then a usage limit (nothing else
//! is told to a held session), a message its inbox holds for a human, owed wakes (whatever the
//! nudge backoff), a due context warning, a waiting rewind, then the nudge. Work on wakebridge's
//! own initiative waits for the active hours, and a session only watched (not kept, or nothing
//! typed at all) is told nothing of it. `session::task` performs the step.

use std::time::Duration;

use jiff::tz::TimeZone;
use tokio::time::Instant;

use crate::api::SessionState;
use crate::budget::policy::{Outlook, Unused};
use crate::clock::duration_ms;
use crate::context::thresholds::Level;
use crate::reading::limit::{Notice, WRITTEN_NOW, describe_reset};
use crate::reading::screen::ScreenReading;
use crate::session::SessionConfig;
use crate::session::gate::Mode;
use crate::session::hours::in_hours;
use crate::session::observe::{Observation, Verdict, classify};
use crate::session::state::{Attempt, Session};
use crate::store::{Limit, Owed, RewindRow, RewindWhy};

pub mod route;

/// After a resume, how long before the session is judged again: long enough for its turn to
/// reach the API and fail again or work.
pub const RESUME_SETTLE_MS: i64 = 30_000;

/// After a resume met the limit again without a new reset time, the wait before the next try:
/// the server's reset may lag the time it showed.
pub const RESUME_AGAIN_MS: i64 = 5 * 60_000;

/// How often a held session's screen is read for the notice, and how long after the limit was
/// recorded the first look waits (the notice may be drawn after the hook that reported it).
pub const LOOK_EVERY_MS: i64 = 60_000;

/// The time of a decision: monotonic (retries, backoff), wall (unix ms) and the local zone.
#[derive(Debug, Clone)]
pub struct Now {
    pub at: Instant,
    pub ms: i64,
    pub local: TimeZone,
}

/// How the session can be reached now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Its pane is there (and its inbox may be too).
    Pane,
    /// No pane: its live inbox alone reaches it, so nothing is read from a screen and nothing
    /// is typed (a rewind's `/clear` cannot be sent).
    Inbox,
    /// Its pane is gone (`why`); a restart could revive it in its pane (`Some(true)`) or in a
    /// new one (`Some(false)`), or not at all while tmux merely did not answer (`None`).
    Gone {
        why: &'static str,
        revive: Option<bool>,
    },
    /// No pane and no live inbox: its events are spooled only.
    Unreachable,
    /// Unreachable, nothing owed, and `SessionEnd` seen or quiet for a day.
    Ended,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screen<'a> {
    NotRead,
    Unreadable,
    /// What the capture showed, as the agent's side read it.
    Read(&'a ScreenReading),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    BeforeNudge,
    WhileHeld,
    AtReset,
}

#[derive(Debug, Clone, Copy)]
pub struct Seen<'a> {
    pub reach: Reach,
    /// Its inbox is live: a warning reaches it between tool calls, no idle moment needed.
    pub inbox: bool,
    pub obs: &'a Observation,
    pub screen: Screen<'a>,
    /// A tmux pane: the nudge path looks at the screen first only there.
    pub tmux: bool,
    pub owed: Option<Owed>,
    /// The usage limit it is held at (`None` too with `[limits] enabled = false`).
    pub limit: Option<&'a Limit>,
    /// Claude Code holds the last message to its inbox for a human.
    pub message_held: bool,
    /// A rewind waiting for it.
    pub rewind: Option<&'a RewindRow>,
    /// This loop already took that rewind (performed or started).
    pub rewind_taken: bool,
    pub rewind_last_done_ms: Option<i64>,
    /// What its account's usage windows say about nudging now.
    pub budget: Outlook,
    /// A person paused it: nothing reaches it.
    pub paused: bool,
    /// Kept (`Ok`): nudged, resumed and rewound on wakebridge's own initiative; else only
    /// watched, and why.
    pub kept: Result<(), &'a str>,
    /// The agent goes on by itself at a usage limit's reset (Claude Code's auto-continue):
    /// it is given its time before a resume is sent.
    pub resumes_itself: bool,
    /// A hook ends a turn that failed (Claude Code's StopFailure): a busy marker from before a
    /// limit is then a turn since.
    pub failed_turn_heard: bool,
    /// Why its agent is not rewound, if it is not: a waiting rewind is skipped, saying so.
    pub not_rewound: Option<&'a str>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Wait(SessionState, String),
    /// Poll again no later than this (unix ms).
    WaitUntil(i64, SessionState, String),
    Later(Attempt, Duration, SessionState, String),
    Look(Look),
    Nudge,
    /// One nudge for a window near its end with much of it unused.
    BudgetNudge(Unused),
    PayOwed(Mode),
    HeldFromScreen(Notice),
    ScreenBlocked(Verdict),
    /// A context warning: the level due and its text.
    Warn(Level, String),
    /// `shown`: `limited (5-hour limit) · resets 15:00`; `tries`: resumes that went before.
    Resume {
        menu: bool,
        shown: String,
        tries: u32,
    },
    Lift,
    MetAgain(Notice, String),
    GiveUp {
        shown: String,
        tries: u32,
    },
    Rewind(RewindRow),
    SkipRewind(RewindRow, String),
    Restart {
        pending: RewindRow,
        in_place: bool,
    },
}

pub fn decide(session: &Session, seen: &Seen, config: &SessionConfig, now: &Now) -> Step {
    match seen.reach {
        Reach::Ended => {
            let reason = "no pane, and ended or quiet for a day";
            return Step::Wait(SessionState::Ended, reason.into());
        }
        Reach::Unreachable => {
            let reason = "no pane in panes.json and no live inbox; events are spooled only";
            return Step::Wait(SessionState::NoPane, reason.into());
        }
        Reach::Gone { why, revive } => return gone(seen, why, revive),
        Reach::Pane | Reach::Inbox => {}
    }
    if seen.paused {
        let reason = "paused by a person: nothing reaches it, its events are owed; \
                      `wakebridge unpause`";
        return Step::Wait(SessionState::Paused, reason.into());
    }
    let step = if let Some(limit) = seen.limit {
        held(session, seen, limit, config, now)
    } else if seen.message_held {
        // Nothing sent again (one more to answer) or typed (into its Deny/Deliver dialog).
        let reason = "a message to its inbox is held for a human (bypass mode): Deliver or Deny \
                      it, or allow it with `wakebridge claude install --accept-session-messages`";
        Step::Wait(SessionState::Dialog, reason.into())
    } else {
        let owed = seen
            .owed
            .and_then(|owed| pay_owed(session, seen, owed, config, now));
        let waiting = seen.rewind.filter(|_| !seen.rewind_taken);
        owed.or_else(|| warning(session, seen, config, now))
            .or_else(|| waiting.and_then(|p| rewind(session, seen, p, config, now)))
            .unwrap_or_else(|| nudge(session, seen, config, now))
    };
    let step = watched(in_hours(step, &config.hours, now), seen, config);
    match step {
        // Events waiting for a wake show over a running turn or an idle session.
        Step::Wait(state, reason) if seen.owed.is_some() && state > SessionState::Owed => {
            Step::Wait(SessionState::Owed, reason)
        }
        step => step,
    }
}

/// An agent that is gone cannot wait for an idle moment: a restart revives it now.
fn gone(seen: &Seen, why: &str, revive: Option<bool>) -> Step {
    match (revive, seen.rewind, seen.rewind_taken) {
        (Some(_), Some(pending), true) if pending.why == RewindWhy::Restart => {
            Step::Wait(SessionState::Rewinding, "restarting".into())
        }
        (Some(in_place), Some(pending), false) if pending.why == RewindWhy::Restart => {
            Step::Restart {
                pending: pending.clone(),
                in_place,
            }
        }
        _ => Step::Wait(SessionState::NoPane, why.into()),
    }
}

/// The due context warning, told through the inbox at once (between tool calls) or typed at
/// the session's next idle moment (the gate refuses a turn, a draft, a dialog); a refusal is
/// tried again after its retry clock.
fn warning(session: &Session, seen: &Seen, config: &SessionConfig, now: &Now) -> Option<Step> {
    if !config.context.warnings || session.waits(Attempt::Warn, now.at) {
        return None;
    }
    let (level, text) = session.context.thresholds.due_message()?;
    let busy = matches!(classify(seen.obs), Verdict::Busy(_) | Verdict::Dialog(_));
    (seen.inbox || !busy).then_some(Step::Warn(level, text))
}

/// `step`, unless the session is only watched: then what it would have told it (or the screen
/// read that leads there) waits, and says why. A session not kept still gets its owed wakes, its
/// warnings, its limit's hold and the rewinds a person asked for; with the spool backend nothing
/// at all is typed, sent or read from a screen.
fn watched(step: Step, seen: &Seen, config: &SessionConfig) -> Step {
    let own = match &step {
        Step::Wait(..) | Step::WaitUntil(..) | Step::Later(..) => return step,
        Step::Nudge | Step::BudgetNudge(_) | Step::Resume { .. } | Step::Restart { .. } => true,
        Step::Look(look) => *look != Look::WhileHeld,
        Step::Rewind(pending) => pending.why == RewindWhy::Auto,
        _ => false,
    };
    let why = match (config.can_type, seen.kept) {
        (false, _) => "watched only: the spool backend types nothing".to_owned(),
        (true, Err(why)) if own => format!("watched, not kept: {why}"),
        (true, _) => return step,
    };
    let state = match step {
        Step::Resume { .. } | Step::Look(_) if seen.limit.is_some() => SessionState::Limited,
        Step::HeldFromScreen(_) | Step::MetAgain(..) | Step::GiveUp { .. } => SessionState::Limited,
        _ => classify(seen.obs).state(),
    };
    Step::Wait(state, why)
}

/// The earliest time after `now_ms` a held session's decision changes without a new signal.
pub fn resume_times(limit: &Limit, config: &SessionConfig, now_ms: i64) -> Option<i64> {
    let clock = resume_clock(limit, config);
    let times = [clock.due?, clock.settled, clock.again];
    times.into_iter().filter(|at| *at > now_ms).min()
}

/// A held session's resume times, unix ms.
struct ResumeClock {
    /// When it is due its resume (`None`: never by itself).
    due: Option<i64>,
    /// When its last try has settled (`i64::MIN` before any try).
    settled: i64,
    /// When it may be tried again after meeting the limit again (likewise).
    again: i64,
}

fn resume_clock(limit: &Limit, config: &SessionConfig) -> ResumeClock {
    let limits = &config.limits;
    let due = (limit.resets_at_ms)
        .filter(|_| limits.resume && !limit.gave_up)
        .map(|at| at.saturating_add(duration_ms(limits.resume_grace)));
    let after_try = |gap: i64| {
        limit
            .last_try_ms
            .map_or(i64::MIN, |at| at.saturating_add(gap))
    };
    ResumeClock {
        due,
        settled: after_try(RESUME_SETTLE_MS),
        again: after_try(RESUME_AGAIN_MS),
    }
}

/// Owed events are paid once the session has been quiet for `owed_after`, whatever its nudge
/// backoff. `None` when it does not look idle.
fn pay_owed(
    session: &Session,
    seen: &Seen,
    owed: Owed,
    config: &SessionConfig,
    now: &Now,
) -> Option<Step> {
    // Its inbox hands a message over between tool calls, as it does a bus event's: no idle
    // moment to wait for.
    if seen.reach == Reach::Inbox {
        return Some(match session.waits(Attempt::Owed, now.at) {
            true => Step::Wait(SessionState::Owed, format!("owed {} event(s)", owed.events)),
            false => Step::PayOwed(Mode::Gated),
        });
    }
    // An Esc interrupt fires no hook, so its busy marker stays: a bus event does not wait the
    // marker's hour when the session says it is idle.
    let stale_marker = seen.obs.stale_marker();
    let obs = Observation {
        busy_marker: seen.obs.busy_marker && !stale_marker,
        ..seen.obs.clone()
    };
    let Verdict::Idle(why) = classify(&obs) else {
        return None;
    };
    if session.quiet_for(now.ms) < config.owed_after || session.waits(Attempt::Owed, now.at) {
        let reason = format!("idle ({why}), owed {} event(s)", owed.events);
        return Some(Step::Wait(SessionState::Owed, reason));
    }
    Some(Step::PayOwed(match stale_marker {
        true => Mode::SeenIdle,
        false => Mode::Gated,
    }))
}

/// A waiting rewind at the session's idle moment; `None` when not idle.
fn rewind(
    session: &Session,
    seen: &Seen,
    pending: &RewindRow,
    config: &SessionConfig,
    now: &Now,
) -> Option<Step> {
    if let Some(why) = seen.not_rewound {
        return Some(Step::SkipRewind(pending.clone(), why.to_owned()));
    }
    let Verdict::Idle(idle_why) = classify(seen.obs) else {
        return None;
    };
    if session.waits(Attempt::Rewind, now.at) {
        let reason = format!("idle ({idle_why}), rewind waiting");
        return Some(Step::Wait(SessionState::Rewinding, reason));
    }
    let idle_for = session.quiet_for(now.ms);
    let due = rewind_due(pending, idle_for, seen.rewind_last_done_ms, config, now.ms);
    Some(due.unwrap_or_else(|| {
        let why = pending.why.as_str();
        let reason = format!("idle ({idle_why}), rewind ({why}) due once settled");
        Step::Wait(SessionState::Rewinding, reason)
    }))
}

/// `pending`'s step for a session idle for `idle_for`, or `None` while it waits: one asked for
/// (or a restart) once the session has settled (`owed_after`), an automatic one after
/// `[rewind] after` and never within `min_gap` of the last (then it is skipped).
fn rewind_due(
    pending: &RewindRow,
    idle_for: Duration,
    last_done_ms: Option<i64>,
    config: &SessionConfig,
    now_ms: i64,
) -> Option<Step> {
    let gap_ms = duration_ms(config.rewind.min_gap);
    let ago_ms = last_done_ms.map(|last| now_ms.saturating_sub(last));
    let settled = idle_for >= config.owed_after;
    match (pending.why, ago_ms.filter(|&ago| ago < gap_ms)) {
        (RewindWhy::Restart, _) if settled => Some(Step::Restart {
            pending: pending.clone(),
            in_place: true,
        }),
        (RewindWhy::Asked, _) if settled => Some(Step::Rewind(pending.clone())),
        (RewindWhy::Auto, Some(ago_ms)) => {
            let ago = ago_ms.max(0) / 1000;
            let detail = format!("the last rewind was {ago}s ago, within rewind.min_gap");
            Some(Step::SkipRewind(pending.clone(), detail))
        }
        (RewindWhy::Auto, None) if idle_for >= config.rewind.after => {
            Some(Step::Rewind(pending.clone()))
        }
        _ => None,
    }
}

fn nudge(session: &Session, seen: &Seen, config: &SessionConfig, now: &Now) -> Step {
    let verdict = classify(seen.obs);
    let Verdict::Idle(why) = verdict else {
        return Step::Wait(verdict.state(), verdict.describe());
    };
    if !config.enabled {
        return Step::Wait(SessionState::Idle, format!("idle ({why}), nudges off"));
    }
    let idle = match () {
        () if session.acknowledged => SessionState::AcknowledgedIdle,
        () if session.count.unanswered > 0 => SessionState::Nudged,
        () => SessionState::Idle,
    };
    if let Outlook::Spare { kind, used } = seen.budget {
        let window = kind.describe();
        let reason = format!("idle ({why}), {window} {}% used, sparing it", used.round());
        return Step::Wait(idle, reason);
    }
    let quiet_for = session.quiet_for(now.ms);
    if let Outlook::UseIt(unused) = seen.budget
        && quiet_for >= config.idle_after
        && !session.waits(Attempt::Nudge, now.at)
    {
        if let Some(step) = look_first(seen, config, idle) {
            return step;
        }
        if seen.obs.screen.as_ref().is_some_and(|s| s.asked) {
            let reason = format!("idle ({why}), asked a question: no budget nudge");
            return Step::Wait(idle, reason);
        }
        return Step::BudgetNudge(unused);
    }
    if session.acknowledged {
        return Step::Wait(SessionState::AcknowledgedIdle, "acknowledged idle".into());
    }
    if quiet_for < config.idle_after {
        let reason = format!("idle ({why}), quiet for {}s", quiet_for.as_secs());
        return Step::Wait(idle, reason);
    }
    let waits = session.waits(Attempt::Nudge, now.at);
    if let Some(block) = session.screen_block.filter(|_| waits) {
        let reason = format!("{}, looking again later", block.describe());
        return Step::Wait(block.state(), reason);
    }
    let next = config.schedule.next(&session.count, session.typing.at);
    if waits || !next.due(now.at) {
        return Step::Wait(idle, format!("idle ({why}), backing off"));
    }
    look_first(seen, config, idle).unwrap_or(Step::Nudge)
}

/// Before a nudge into a tmux pane: read its screen, and stop at a limit's notice or at what
/// the screen shows that the cheap signals did not.
fn look_first(seen: &Seen, config: &SessionConfig, idle: SessionState) -> Option<Step> {
    if !seen.tmux {
        return None;
    }
    match seen.screen {
        Screen::NotRead => Some(Step::Look(Look::BeforeNudge)),
        Screen::Unreadable => Some(Step::Wait(idle, "screen unreadable".into())),
        Screen::Read(screen) => {
            if config.limits.enabled
                && let Some(notice) = screen.limit.as_ref().and_then(|l| l.notice.clone())
            {
                return Some(Step::HeldFromScreen(notice));
            }
            let verdict = classify(seen.obs);
            (!matches!(verdict, Verdict::Idle(_))).then_some(Step::ScreenBlocked(verdict))
        }
    }
}

fn held(session: &Session, seen: &Seen, limit: &Limit, config: &SessionConfig, now: &Now) -> Step {
    let limits = &config.limits;
    let reset = describe_reset(limit.resets_at_ms, now.ms, &now.local);
    let shown = format!("limited ({}) · {reset}", limit.kind);
    let clock = resume_clock(limit, config);
    let waiting = clock.due.is_none_or(|due| now.ms < due)
        || now.ms < clock.settled
        || session.waits(Attempt::Resume, now.at);
    if waiting {
        // No hook reports a human's or Claude Code's own resume of a session without hooks:
        // once a minute, whether the notice is still the screen's latest word.
        let reason = match () {
            () if limit.gave_up => format!("{shown}; gave up after {} resumes", limit.tries),
            () if !limits.resume => format!("{shown}; resume off"),
            () => shown,
        };
        let look_at = session
            .limit_look_ms
            .unwrap_or(limit.since_ms.saturating_add(LOOK_EVERY_MS));
        return match seen.screen {
            Screen::Read(screen) if notice_gone(screen) => Step::Lift,
            Screen::NotRead if now.ms >= look_at && seen.reach != Reach::Inbox => {
                Step::Look(Look::WhileHeld)
            }
            _ => Step::Wait(SessionState::Limited, reason),
        };
    }
    // A turn that failed at the limit where no hook ends a failed turn (Codex's) leaves its
    // prompt's busy marker and hook: with nothing heard since the limit, they are that turn's,
    // not signs of work. Claude Code's StopFailure ends it, so there they stay signs of work.
    // A resume's own prompt fires a hook too: within the echo grace of the try it is no sign.
    let echo_until = (limit.last_try_ms)
        .map(|at| at.saturating_add(duration_ms(crate::session::ECHO_GRACE)))
        .map_or(limit.since_ms, |until| until.max(limit.since_ms));
    let heard_since = (seen.obs.hook).is_some_and(|(_, at_ms)| at_ms > echo_until);
    let stale = !seen.failed_turn_heard && !heard_since;
    let obs = Observation {
        busy_marker: seen.obs.busy_marker && !stale,
        hook: seen.obs.hook.filter(|_| !stale),
        ..seen.obs.clone()
    };
    if let Verdict::Busy(why) = classify(&obs) {
        // Claude Code's own auto-continue, or someone typed: its hooks lift the hold.
        let reason = format!("{shown}; working again ({why}), not resumed");
        return Step::Wait(SessionState::Limited, reason);
    }
    // With no pane there is no screen: the hooks lift the hold, and the resume goes to its inbox.
    let screen = match seen.screen {
        _ if seen.reach == Reach::Inbox => None,
        Screen::NotRead => return Step::Look(Look::AtReset),
        // Without the screen there is no telling whether it still shows the limit.
        Screen::Unreadable => {
            let reason = format!("{shown}; screen unreadable, not resumed");
            let wait = Duration::from_millis(LOOK_EVERY_MS.unsigned_abs());
            return Step::Later(Attempt::Resume, wait, SessionState::Limited, reason);
        }
        Screen::Read(screen) => Some(screen),
    };
    // A screen whose reader cannot tell a limit is no screen here.
    let on_screen = screen.and_then(|s| s.limit.as_ref());
    let notice = on_screen.and_then(|s| s.notice.clone());
    let menu = on_screen.is_some_and(|s| s.menu);
    if on_screen.is_some() && notice.is_none() && !menu {
        return Step::Lift;
    }
    // The agent's own auto-continue (Claude Code's) is armed, or with no screen may be: a resume
    // sent now would race it, so it is given its time; only a session it left waiting is resumed
    // here. An agent that never goes on by itself (Codex) is resumed at once.
    if seen.resumes_itself
        && on_screen.is_none_or(|s| s.resuming_itself)
        && let Some(until_ms) = limit
            .resets_at_ms
            .map(|at| at.saturating_add(duration_ms(limits.auto_continue_wait)))
        && now.ms < until_ms
    {
        let reason = format!("{shown}; its own auto-continue goes first, watching");
        return Step::WaitUntil(until_ms, SessionState::Limited, reason);
    }
    // After a resume, a notice with another reset is the limit met again, written just now.
    if limit.tries > 0
        && let Some(notice) = notice
        && notice.resets.is_some()
        && notice.resets != limit.resets_text
        && notice
            .resets_at_ms(now.ms, WRITTEN_NOW, &now.local)
            .is_some_and(|at| at > now.ms)
    {
        return Step::MetAgain(notice, shown);
    }
    if limit.tries >= limits.max_tries {
        return Step::GiveUp {
            shown,
            tries: limit.tries,
        };
    }
    if now.ms < clock.again {
        let reason = format!("{shown}; met the limit again, trying again soon");
        return Step::Wait(SessionState::Limited, reason);
    }
    Step::Resume {
        menu,
        shown,
        tries: limit.tries,
    }
}

fn notice_gone(screen: &ScreenReading) -> bool {
    (screen.limit.as_ref()).is_some_and(|l| l.notice.is_none() && !l.menu)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::Agent;
    use crate::budget::WindowKind;
    use crate::reading::hook::HookKind;
    use crate::reading::screen::Title;
    use crate::store::LimitSource;

    const NOW_MS: i64 = 1_800_000_000_000;

    /// Claude Code's screen `capture` as its side reads it, kept for the test's length.
    fn read(capture: &str) -> &'static ScreenReading {
        Box::leak(Box::new(Agent::Claude.side().read_screen(capture)))
    }

    fn config() -> SessionConfig {
        let d = crate::config::defaults();
        SessionConfig::from_settings(d, std::path::PathBuf::new(), vec![], true).unwrap()
    }

    fn now() -> Now {
        Now {
            at: Instant::now(),
            ms: NOW_MS,
            local: TimeZone::UTC,
        }
    }

    /// An idle session (title and hook say so), quiet since `quiet_s` seconds ago.
    fn idle(quiet_s: i64) -> (Session, Observation) {
        let obs = Observation {
            title: Some(Title::Idle),
            hook: Some((HookKind::TurnEnded, 1)),
            ..Observation::default()
        };
        let (activity, _) =
            crate::session::observe::Activity::first(&obs, NOW_MS - quiet_s * 1000, None, 10_000);
        let mut session = Session::default();
        session.activity = Some(activity);
        (session, obs)
    }

    fn seen<'a>(obs: &'a Observation) -> Seen<'a> {
        Seen {
            reach: Reach::Pane,
            inbox: false,
            obs,
            screen: Screen::NotRead,
            tmux: true,
            owed: None,
            limit: None,
            message_held: false,
            rewind: None,
            rewind_taken: false,
            rewind_last_done_ms: None,
            budget: Outlook::Plain,
            paused: false,
            kept: Ok(()),
            resumes_itself: true,
            failed_turn_heard: true,
            not_rewound: None,
        }
    }

    fn limit(resets_in_ms: i64, tries: u32) -> Limit {
        Limit {
            kind: "5-hour limit".into(),
            resets_text: Some("3pm (UTC)".into()),
            resets_at_ms: Some(NOW_MS + resets_in_ms),
            how: LimitSource::Hook,
            since_ms: NOW_MS - 10_000,
            tries,
            last_try_ms: None,
            gave_up: false,
        }
    }

    const IDLE_SCREEN: &str = "done\n────────────\n❯ \n────────────\n";
    const LIMIT_SCREEN: &str =
        "⎿  You've hit your 5-hour limit · resets 3pm (UTC)\n────────────\n❯ \n────────────\n";

    #[test]
    fn an_idle_session_is_nudged_only_when_quiet_long_enough_and_after_a_look() {
        let config = config();
        let (session, obs) = idle(10);
        let step = decide(&session, &seen(&obs), &config, &now());
        assert!(
            matches!(step, Step::Wait(SessionState::Idle, ref why) if why.contains("quiet for 10s")),
            "{step:?}"
        );
        let (session, obs) = idle(600);
        assert_eq!(
            decide(&session, &seen(&obs), &config, &now()),
            Step::Look(Look::BeforeNudge)
        );
        let mut with_screen = seen(&obs);
        with_screen.screen = Screen::Read(read(IDLE_SCREEN));
        assert_eq!(decide(&session, &with_screen, &config, &now()), Step::Nudge);
        // A zellij pane is nudged without a look (nothing cheap to read it by).
        let mut zellij = seen(&obs);
        zellij.tmux = false;
        assert_eq!(decide(&session, &zellij, &config, &now()), Step::Nudge);
    }

    #[test]
    fn what_only_the_screen_shows_stops_a_nudge() {
        let config = config();
        let (session, mut obs) = idle(600);
        let mut look = seen(&obs);
        look.screen = Screen::Read(read(LIMIT_SCREEN));
        assert!(matches!(
            decide(&session, &look, &config, &now()),
            Step::HeldFromScreen(_)
        ));
        obs.screen = Some(read("❯ half a sentence\n").clone());
        let mut drafted = seen(&obs);
        drafted.screen = Screen::Read(read("❯ half a sentence\n"));
        // The draft is the verdict: nothing is typed.
        let step = decide(&session, &drafted, &config, &now());
        assert!(
            matches!(
                step,
                Step::ScreenBlocked(_) | Step::Wait(SessionState::Draft, _)
            ),
            "{step:?}"
        );
    }

    #[test]
    fn the_states_of_a_session_that_is_not_idle() {
        let config = config();
        let (session, mut obs) = idle(600);
        obs.busy_marker = true;
        assert!(matches!(
            decide(&session, &seen(&obs), &config, &now()),
            Step::Wait(SessionState::Working, _)
        ));
        obs.busy_marker = false;
        obs.hook = Some((HookKind::Waiting, 1));
        assert!(matches!(
            decide(&session, &seen(&obs), &config, &now()),
            Step::Wait(SessionState::Dialog, _)
        ));
        let mut acknowledged = idle(600).0;
        acknowledged.acknowledged = true;
        let obs = idle(600).1;
        assert_eq!(
            decide(&acknowledged, &seen(&obs), &config, &now()),
            Step::Wait(SessionState::AcknowledgedIdle, "acknowledged idle".into())
        );
    }

    /// The budget's outlook in every phase a session can be in when it is decided, on a fixed
    /// clock: it starts a budget nudge only from idle (acknowledged too), quiet, with the screen
    /// read; it spares only nudges; it never holds what is not its to hold.
    #[test]
    fn the_budget_outlook_in_every_phase() {
        let config = config();
        let window = WindowKind::FiveHour;
        let unused = Unused {
            kind: window,
            used: 40.0,
            resets_at_ms: NOW_MS + 1_800_000,
        };
        let use_it = Outlook::UseIt(unused);
        let spare = Outlook::Spare {
            kind: window,
            used: 95.0,
        };
        let budget_nudge = Step::BudgetNudge(unused);
        let sparing = |state| {
            Step::Wait(
                state,
                "idle (hook: turn ended), 5-hour window 95% used, sparing it".into(),
            )
        };
        let decided = |session: &Session, obs: &Observation, screen, budget| {
            let mut s = seen(obs);
            s.screen = screen;
            s.budget = budget;
            decide(session, &s, &config, &now())
        };
        let idle_screen = Screen::Read(read(IDLE_SCREEN));

        // Idle and quiet: a look first, then the budget nudge; spared; or the plain nudge.
        let (session, obs) = idle(600);
        assert_eq!(
            decided(&session, &obs, Screen::NotRead, use_it),
            Step::Look(Look::BeforeNudge)
        );
        assert_eq!(decided(&session, &obs, idle_screen, use_it), budget_nudge);
        assert_eq!(
            decided(&session, &obs, idle_screen, spare),
            sparing(SessionState::Idle)
        );
        assert_eq!(
            decided(&session, &obs, idle_screen, Outlook::Plain),
            Step::Nudge
        );

        // Acknowledged idle: the budget nudge still comes; spared; otherwise left alone.
        let mut acknowledged = idle(600).0;
        acknowledged.acknowledged = true;
        assert_eq!(
            decided(&acknowledged, &obs, idle_screen, use_it),
            budget_nudge
        );
        assert_eq!(
            decided(&acknowledged, &obs, idle_screen, spare),
            sparing(SessionState::AcknowledgedIdle)
        );
        assert_eq!(
            decided(&acknowledged, &obs, idle_screen, Outlook::Plain),
            Step::Wait(SessionState::AcknowledgedIdle, "acknowledged idle".into())
        );

        // Not quiet for `idle_after` yet: it waits either way.
        let (fresh, fresh_obs) = idle(10);
        assert!(matches!(
            decided(&fresh, &fresh_obs, idle_screen, use_it),
            Step::Wait(SessionState::Idle, _)
        ));

        // Waiting on a person: a question it asked, or a dialog on screen.
        let mut asked = obs.clone();
        asked.screen = Some(read("● Shall I go on?\n\n────────────\n❯ \n────────────\n").clone());
        assert_eq!(
            decided(&session, &asked, idle_screen, use_it),
            Step::Wait(
                SessionState::Idle,
                "idle (hook: turn ended), asked a question: no budget nudge".into()
            )
        );
        let dialog = "Do you want to proceed?\n❯ 1. Yes\n  2. No\n";
        let mut on_dialog = obs.clone();
        on_dialog.screen = Some(read(dialog).clone());
        assert!(matches!(
            decided(&session, &on_dialog, Screen::Read(read(dialog)), use_it),
            Step::Wait(SessionState::Dialog, _) | Step::ScreenBlocked(_)
        ));

        // Working: nothing, whatever the budget.
        let busy = Observation {
            title: Some(Title::Busy),
            ..obs.clone()
        };
        for budget in [use_it, spare, Outlook::Plain] {
            assert!(matches!(
                decided(&session, &busy, idle_screen, budget),
                Step::Wait(SessionState::Working, _)
            ));
        }

        // Held at a limit: the hold decides; owed events are paid even from a spent window.
        let held = limit(3_600_000, 0);
        for budget in [use_it, spare] {
            let mut s = seen(&obs);
            s.limit = Some(&held);
            s.budget = budget;
            let step = decide(&session, &s, &config, &now());
            assert!(
                !matches!(step, Step::BudgetNudge(_) | Step::Nudge),
                "{step:?}"
            );
        }
        let owed = Owed {
            events: 1,
            since_ms: NOW_MS,
        };
        for budget in [use_it, spare] {
            let mut s = seen(&obs);
            s.owed = Some(owed);
            s.budget = budget;
            assert_eq!(
                decide(&session, &s, &config, &now()),
                Step::PayOwed(Mode::Gated)
            );
        }

        // Nudges off: no budget nudge either.
        let off = SessionConfig {
            enabled: false,
            ..config.clone()
        };
        let mut s = seen(&obs);
        s.screen = idle_screen;
        s.budget = use_it;
        assert!(matches!(
            decide(&session, &s, &off, &now()),
            Step::Wait(SessionState::Idle, _)
        ));
    }

    #[test]
    fn owed_events_are_paid_once_settled_whatever_the_backoff_and_through_a_stale_marker() {
        let config = config();
        let (mut session, mut obs) = idle(600);
        session.acknowledged = true;
        let owed = Owed {
            events: 2,
            since_ms: NOW_MS,
        };
        let mut s = seen(&obs);
        s.owed = Some(owed);
        assert_eq!(
            decide(&session, &s, &config, &now()),
            Step::PayOwed(Mode::Gated)
        );
        // An Esc left the marker; the idle title says it is stale.
        obs.busy_marker = true;
        let mut s = seen(&obs);
        s.owed = Some(owed);
        assert_eq!(
            decide(&session, &s, &config, &now()),
            Step::PayOwed(Mode::SeenIdle)
        );
        let (quiet_briefly, obs) = idle(2);
        let mut s = seen(&obs);
        s.owed = Some(owed);
        assert!(matches!(
            decide(&quiet_briefly, &s, &config, &now()),
            Step::Wait(SessionState::Owed, _)
        ));
    }

    #[test]
    fn with_no_pane_owed_events_go_at_once_and_a_message_held_for_a_human_stops_everything() {
        let config = config();
        let owed = Owed {
            events: 1,
            since_ms: NOW_MS,
        };
        // Mid-turn and only just quiet: its inbox takes the wake between tool calls.
        let (session, mut obs) = idle(2);
        obs.busy_marker = true;
        let mut s = seen(&obs);
        (s.reach, s.tmux, s.owed) = (Reach::Inbox, false, Some(owed));
        assert_eq!(
            decide(&session, &s, &config, &now()),
            Step::PayOwed(Mode::Gated)
        );
        // A message its inbox holds for a human: nothing paid, nudged or rewound meanwhile.
        let (quiet, obs) = idle(3600);
        for pane in [Reach::Inbox, Reach::Pane] {
            let mut s = seen(&obs);
            (s.reach, s.owed, s.message_held) = (pane, Some(owed), true);
            assert!(matches!(
                decide(&quiet, &s, &config, &now()),
                Step::Wait(SessionState::Dialog, _)
            ));
        }
        // A usage limit goes first: its resume is what the session waits for.
        let held_at = limit(-3_600_000, 0);
        let mut s = seen(&obs);
        (s.message_held, s.limit) = (true, Some(&held_at));
        assert_eq!(
            decide(&quiet, &s, &config, &now()),
            Step::Look(Look::AtReset)
        );
    }

    #[test]
    fn a_held_session_waits_for_its_reset_looks_at_it_and_resumes_once() {
        let config = config();
        let (session, obs) = idle(600);
        let held = limit(60_000, 0);
        let mut s = seen(&obs);
        s.limit = Some(&held);
        // Before the reset: held; the first look waits a minute after the limit was seen.
        assert!(matches!(
            decide(&session, &s, &config, &now()),
            Step::Wait(SessionState::Limited, _)
        ));
        let passed = limit(-61_000, 0);
        s.limit = Some(&passed);
        assert_eq!(
            decide(&session, &s, &config, &now()),
            Step::Look(Look::AtReset)
        );
        s.screen = Screen::Read(read(LIMIT_SCREEN));
        assert!(matches!(
            decide(&session, &s, &config, &now()),
            Step::Resume {
                menu: false,
                tries: 0,
                ..
            }
        ));
        s.screen = Screen::Read(read(IDLE_SCREEN));
        assert_eq!(decide(&session, &s, &config, &now()), Step::Lift);
        // A screen whose reader cannot tell a limit (Codex's) lifts nothing: resumed.
        let untold = ScreenReading {
            limit: None,
            ..read(IDLE_SCREEN).clone()
        };
        let mut codex = s;
        (codex.screen, codex.resumes_itself) = (Screen::Read(&untold), false);
        assert!(matches!(
            decide(&session, &codex, &config, &now()),
            Step::Resume { menu: false, .. }
        ));
        // Claude Code's own auto-continue armed: left to it for auto_continue_wait.
        let armed = format!("{LIMIT_SCREEN}  Continuing shortly · Esc to cancel\n");
        s.screen = Screen::Read(read(&armed));
        assert!(matches!(
            decide(&session, &s, &config, &now()),
            Step::WaitUntil(_, SessionState::Limited, _)
        ));
        // Its tries spent: given up.
        let spent = limit(-61_000, config.limits.max_tries);
        s.limit = Some(&spent);
        s.screen = Screen::Read(read(LIMIT_SCREEN));
        assert!(matches!(
            decide(&session, &s, &config, &now()),
            Step::GiveUp { tries: 3, .. }
        ));
    }

    /// A turn that failed at the limit with no Stop hook (Codex's) leaves its prompt's busy
    /// marker; only a hook heard after the limit makes the marker a sign of work again. An agent
    /// that never goes on by itself is resumed without waiting for an auto-continue.
    #[test]
    fn a_busy_marker_from_before_the_limit_does_not_stop_its_resume() {
        let config = config();
        let passed = limit(-61_000, 0);
        let (session, mut obs) = idle(600);
        obs.busy_marker = true;
        obs.hook = Some((HookKind::Working, passed.since_ms - 5));
        let mut s = seen(&obs);
        (s.reach, s.tmux, s.limit) = (Reach::Inbox, false, Some(&passed));
        (s.resumes_itself, s.failed_turn_heard) = (false, false);
        assert!(
            matches!(decide(&session, &s, &config, &now()), Step::Resume { .. }),
            "{:?}",
            decide(&session, &s, &config, &now())
        );
        obs.hook = Some((HookKind::Working, passed.since_ms + 5));
        let mut s = seen(&obs);
        (s.reach, s.tmux, s.limit) = (Reach::Inbox, false, Some(&passed));
        (s.resumes_itself, s.failed_turn_heard) = (false, false);
        assert!(matches!(
            decide(&session, &s, &config, &now()),
            Step::Wait(SessionState::Limited, _)
        ));
        // A resume that met the limit again: its own prompt's hook is no sign of work either.
        let again = Limit {
            tries: 1,
            since_ms: NOW_MS - 10 * 60_000,
            last_try_ms: Some(NOW_MS - 6 * 60_000),
            ..passed.clone()
        };
        let echo = again.last_try_ms.map(|at| at + 1_000);
        obs.hook = echo.map(|at| (HookKind::Working, at));
        let mut s = seen(&obs);
        (s.reach, s.tmux, s.limit) = (Reach::Inbox, false, Some(&again));
        (s.resumes_itself, s.failed_turn_heard) = (false, false);
        assert!(
            matches!(
                decide(&session, &s, &config, &now()),
                Step::Resume { tries: 1, .. }
            ),
            "{:?}",
            decide(&session, &s, &config, &now())
        );
        // Where a hook ends a failed turn (Claude Code), the marker stays a sign of work.
        obs.hook = Some((HookKind::Working, passed.since_ms - 5));
        let mut s = seen(&obs);
        (s.reach, s.tmux, s.limit) = (Reach::Inbox, false, Some(&passed));
        s.resumes_itself = false;
        assert!(matches!(
            decide(&session, &s, &config, &now()),
            Step::Wait(SessionState::Limited, _)
        ));
    }

    #[test]
    fn a_gone_pane_is_restarted_when_a_restart_waits_and_shown_as_no_pane_otherwise() {
        let config = config();
        let (session, obs) = idle(600);
        let restart = RewindRow {
            session_id: "s".into(),
            why: RewindWhy::Restart,
            asked_ms: NOW_MS,
            done_ms: None,
            outcome: None,
            detail: None,
        };
        let mut s = seen(&obs);
        s.reach = Reach::Gone {
            why: "pane dead",
            revive: Some(true),
        };
        assert!(matches!(
            decide(&session, &s, &config, &now()),
            Step::Wait(SessionState::NoPane, _)
        ));
        (s.rewind, s.rewind_taken) = (Some(&restart), false);
        assert!(matches!(
            decide(&session, &s, &config, &now()),
            Step::Restart { in_place: true, .. }
        ));
        (s.rewind, s.rewind_taken) = (Some(&restart), true);
        assert_eq!(
            decide(&session, &s, &config, &now()),
            Step::Wait(SessionState::Rewinding, "restarting".into())
        );
        // A rewind asked for waits for the idle moment, then is performed.
        let asked = RewindRow {
            why: RewindWhy::Asked,
            ..restart.clone()
        };
        let mut s = seen(&obs);
        (s.rewind, s.rewind_taken) = (Some(&asked), false);
        assert_eq!(
            decide(&session, &s, &config, &now()),
            Step::Rewind(asked.clone())
        );
        // An agent that is not rewound: skipped at once, saying why.
        s.not_rewound = Some("not this agent");
        assert_eq!(
            decide(&session, &s, &config, &now()),
            Step::SkipRewind(asked.clone(), "not this agent".into())
        );
    }

    #[test]
    fn asked_rewinds_wait_to_settle_and_automatic_ones_for_after_and_the_gap() {
        let settle = Duration::from_secs(10);
        let c = SessionConfig {
            owed_after: settle,
            ..config()
        };
        let row = |why| RewindRow {
            session_id: "s".into(),
            why,
            asked_ms: 0,
            done_ms: None,
            outcome: None,
            detail: None,
        };
        let asked = row(RewindWhy::Asked);
        let now_rewind = |row: &RewindRow| Some(Step::Rewind(row.clone()));
        assert_eq!(
            rewind_due(&asked, Duration::from_secs(9), None, &c, 0),
            None
        );
        assert_eq!(rewind_due(&asked, settle, None, &c, 0), now_rewind(&asked));
        // An asked rewind ignores the gap: the agent knows it checkpointed.
        assert_eq!(
            rewind_due(&asked, settle, Some(0), &c, 1),
            now_rewind(&asked)
        );
        let auto = row(RewindWhy::Auto);
        let after = c.rewind.after;
        let now = 10_000_000;
        assert_eq!(rewind_due(&auto, settle, None, &c, now), None);
        assert_eq!(rewind_due(&auto, after, None, &c, now), now_rewind(&auto));
        let recent = Some(now - 60_000);
        assert!(matches!(
            rewind_due(&auto, after, recent, &c, now),
            Some(Step::SkipRewind(_, why)) if why.contains("60s ago")
        ));
        let long_ago = Some(now - 1_800_000);
        assert_eq!(
            rewind_due(&auto, after, long_ago, &c, now),
            now_rewind(&auto)
        );
        let restart = row(RewindWhy::Restart);
        assert!(matches!(
            rewind_due(&restart, settle, recent, &c, now),
            Some(Step::Restart { in_place: true, .. })
        ));
        assert_eq!(rewind_due(&restart, Duration::ZERO, None, &c, 0), None);
    }

    #[test]
    fn the_loop_wakes_for_a_held_sessions_next_decision() {
        let config = config();
        let held = limit(60_000, 0);
        assert_eq!(
            resume_times(&held, &config, NOW_MS),
            Some(NOW_MS + 60_000 + 60_000)
        );
        let gave_up = Limit {
            gave_up: true,
            ..held
        };
        assert_eq!(resume_times(&gave_up, &config, NOW_MS), None);
    }
}
