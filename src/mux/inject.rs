//! The front door for typing into a pane: one async lock per pane, the stale-pane guard, the
//! backend's keystroke steps under one budget, and the submit confirmed by reading the prompt
//! line back.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex as StdMutex, PoisonError};
use std::time::Duration;

use tokio::sync::{Mutex, OwnedMutexGuard};
use tokio::time::Instant;

use super::process::{MuxError, STEP_FLOOR};
use super::ps;
use super::text::KeystrokeText;
use super::tmux::Tmux;
use super::zellij::{Zellij, ZellijPane};
use super::{Mux, MuxConfig, PaneState, StaleReason};
use crate::deadline::Deadline;
use crate::reading::limit::Notice;
use crate::reading::screen::{PromptReader, ScreenReading};
use crate::wakedir::target::PaneTarget;

#[derive(Debug, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
#[strum(serialize_all = "kebab-case")]
pub enum InjectError {
    #[error("pane is stale, nothing typed: {reason}")]
    #[strum(serialize = "stale")]
    StalePane { reason: StaleReason },
    #[error("the prompt already holds text, nothing typed")]
    Occupied,
    #[error("{0} holds the pane, nothing typed")]
    Held(&'static str),
    /// Only the resume message is typed over a usage limit's notice.
    #[error("the session is at its {} (resets {}), nothing typed", .0.kind, .0.resets.as_deref().unwrap_or("at a time not shown"))]
    Limited(Notice),
    #[error("typed, but still on the prompt line after a second Enter: not submitted")]
    Unsubmitted,
    #[error("pane stayed busy with another injection for {}ms; nothing typed", waited.as_millis())]
    PaneBusy { waited: Duration },
    /// If it was the submit, the text may be typed but unsubmitted.
    #[error(transparent)]
    Failed(#[from] MuxError),
}

impl InjectError {
    pub fn kinds() -> impl Iterator<Item = &'static str> {
        use strum::VariantNames;
        let own = InjectError::VARIANTS
            .iter()
            .filter(|kind| **kind != "failed");
        own.chain(MuxError::KINDS).copied()
    }

    /// A stable short name for warn-once keys and metric labels.
    pub fn kind(&self) -> &'static str {
        match self {
            InjectError::Failed(err) => err.kind(),
            other => other.into(),
        }
    }
}

/// Lock-map key: a tmux pane id is server-wide, so its informational session goes.
fn lock_key(target: &PaneTarget) -> PaneTarget {
    match target {
        PaneTarget::Tmux { pane, .. } => PaneTarget::Tmux {
            pane: pane.clone(),
            session: None,
        },
        zellij @ PaneTarget::Zellij { .. } => zellij.clone(),
    }
}

/// Runs `$body` with `$mux` bound to the target's backend and `$pane` to its pane name: the
/// backends' `Pane` types differ, so a closure over `impl Mux` cannot do it.
macro_rules! on_backend {
    ($self:ident, $target:expr, |$mux:ident, $pane:ident| $body:expr) => {
        match $target {
            PaneTarget::Tmux { pane, .. } => {
                let ($mux, $pane) = (&$self.tmux, pane.as_str());
                $body
            }
            PaneTarget::Zellij { pane, session } => {
                let zellij_pane = ZellijPane {
                    session: session.clone(),
                    pane: pane.clone(),
                };
                let ($mux, $pane) = (&$self.zellij, &zellij_pane);
                $body
            }
        }
    };
}

/// Share one (`Arc`) between every feature: the pane lock only works if they all use it.
#[derive(Debug)]
pub struct Injector {
    tmux: Tmux,
    zellij: Zellij,
    submit_delay: Duration,
    locks: StdMutex<HashMap<PaneTarget, Arc<Mutex<()>>>>,
}

impl Injector {
    pub fn new(config: &MuxConfig) -> Self {
        Self {
            tmux: Tmux::new(config),
            zellij: Zellij::new(config),
            submit_delay: config.submit_delay,
            locks: StdMutex::new(HashMap::new()),
        }
    }

    pub fn tmux(&self) -> &Tmux {
        &self.tmux
    }

    /// Check, type, press Enter once the text shows, confirm, under the pane's lock within
    /// `deadline` (the submit and its confirmation may overrun it by [`STEP_FLOOR`],
    /// [`CONFIRM_WAIT`] and [`LAST_CONFIRM_WAIT`]).
    /// `prompt` reads the agent's prompt in that pane; `holder`, where given, is a file a
    /// process on the pane must hold open for the pane to be the session's.
    pub async fn inject(
        &self,
        prompt: &PromptReader,
        holder: Option<&Path>,
        target: &PaneTarget,
        text: &KeystrokeText,
        deadline: Deadline,
    ) -> Result<&'static str, InjectError> {
        let _held = self.lock_pane(target, deadline).await?;
        let delay = self.submit_delay;
        on_backend!(self, target, |mux, pane| guarded_inject(
            mux, pane, prompt, holder, text, delay, deadline
        )
        .await)
    }

    /// The guard's verdict, typing nothing (for `doctor`).
    pub async fn check(
        &self,
        target: &PaneTarget,
        deadline: Deadline,
    ) -> Result<PaneState, MuxError> {
        on_backend!(self, target, |mux, pane| mux
            .check_pane(pane, deadline)
            .await)
    }

    /// The pane's screen once the guard has found it live, under the pane's lock.
    pub async fn screen(
        &self,
        target: &PaneTarget,
        deadline: Deadline,
    ) -> Result<Option<String>, InjectError> {
        let _held = self.lock_pane(target, deadline).await?;
        on_backend!(self, target, |mux, pane| guarded_screen(
            mux, pane, deadline
        )
        .await)
    }

    /// Picks the menu option `locate` finds on the screen by typing its number (no Enter:
    /// Claude Code's menus act on the digit). `Ok(false)`: not on the screen. A menu still open
    /// after [`CONFIRM_WAIT`] is [`InjectError::Unsubmitted`].
    pub async fn pick(
        &self,
        target: &PaneTarget,
        locate: fn(&str) -> Option<u8>,
        deadline: Deadline,
    ) -> Result<bool, InjectError> {
        let _held = self.lock_pane(target, deadline).await?;
        on_backend!(self, target, |mux, pane| guarded_pick(
            mux, pane, locate, deadline
        )
        .await)
    }

    async fn lock_pane(
        &self,
        target: &PaneTarget,
        deadline: Deadline,
    ) -> Result<OwnedMutexGuard<()>, InjectError> {
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
            // Forget locks nobody holds or waits for, so the map does not grow with every pane
            // ever seen. Under the map's mutex no one can be cloning one meanwhile.
            locks.retain(|_, lock| Arc::strong_count(lock) > 1);
            Arc::clone(locks.entry(lock_key(target)).or_default())
        };
        let waiting_since = Instant::now();
        tokio::time::timeout_at(deadline.instant(), lock.lock_owned())
            .await
            .map_err(|_| InjectError::PaneBusy {
                waited: waiting_since.elapsed(),
            })
    }
}

/// How long the prompt line is watched after an Enter for the text to leave it, before one more
/// Enter: Claude Code clears the line within a frame or two of taking the submit, and an Enter
/// it dropped is not taken later.
pub const CONFIRM_WAIT: Duration = Duration::from_millis(300);
/// How long the line is watched after that second Enter before the text counts as not
/// submitted: on a loaded machine Claude Code can take the submit (its UserPromptSubmit hooks
/// first) and redraw well over 1 s later, and waiting types nothing more.
pub const LAST_CONFIRM_WAIT: Duration = Duration::from_secs(3);
/// Longest wait for typed text to show on a prompt line before Enter (a busy machine is slow).
pub const SHOW_WAIT: Duration = Duration::from_secs(2);
const READ_GAP: Duration = Duration::from_millis(10);

/// Guard, type, submit once the text shows, confirm. Typing starts only if the budget left
/// holds the typing call's floor and the submit delay, so the submit starts by the deadline.
/// Where no prompt line can be read the submit cannot be confirmed and is taken as done.
/// Returns the backend's name.
pub async fn guarded_inject<M: Mux>(
    mux: &M,
    pane: &M::Pane,
    prompt: &PromptReader,
    holder: Option<&Path>,
    text: &KeystrokeText,
    submit_delay: Duration,
    deadline: Deadline,
) -> Result<&'static str, InjectError> {
    let mut state = mux.check_pane(pane, deadline).await?;
    if state == PaneState::Live
        && let Some(file) = holder
    {
        state = held_open(mux, pane, file, deadline).await?;
    }
    // A pane that showed a prompt line: a read without one later is a glitch to read past.
    let mut prompt_shown = false;
    if state == PaneState::Live
        && let Some(mut screen) = mux.screen(pane, deadline).await?
    {
        if !(prompt.shown)(&screen) {
            // A frame caught mid-redraw (cleared, not drawn yet) hides a draft or a menu as
            // well as the prompt line: look once more before typing into it.
            tokio::time::sleep(READ_GAP).await;
            if let Some(again) = mux.screen(pane, deadline).await? {
                screen = again;
            }
        }
        prompt_shown = (prompt.shown)(&screen);
        if !text.resumes_a_limit() {
            let seen = (prompt.read)(&screen);
            if let Some(notice) = seen.limit.as_ref().and_then(|l| l.notice.clone()) {
                return Err(InjectError::Limited(notice));
            }
            state = screen_state(seen);
        } else {
            state = screen_state((prompt.read)(&(prompt.without_own_resume)(&screen)));
        }
    }
    match state {
        PaneState::Live if prompt.typed_only_at_the_prompt && !prompt_shown => {
            return Err(InjectError::Held("no prompt on screen"));
        }
        PaneState::Live => {}
        PaneState::Stale(reason) => return Err(InjectError::StalePane { reason }),
        PaneState::Held(what) => return Err(InjectError::Held(what)),
        // The very text we are about to type, left unsubmitted by an earlier attempt whose
        // Enter was lost: submit it instead of typing it again.
        PaneState::Occupied { input } if text.as_str().starts_with(&input) => {
            mux.submit(pane, deadline).await?;
            confirm_submitted(mux, pane, prompt, text, true).await?;
            return Ok(M::NAME);
        }
        PaneState::Occupied { .. } => return Err(InjectError::Occupied),
    }
    let left = deadline.remaining();
    if left < submit_delay + STEP_FLOOR {
        return Err(MuxError::BudgetSpent { left }.into());
    }
    mux.type_text(pane, text, Deadline::after(left - submit_delay))
        .await?;
    // Where the pane shows a prompt line, Enter waits for the text on it: an Enter that reaches
    // Claude Code in the same burst as the text is taken as part of a paste and leaves a draft.
    let show_wait = if prompt_shown {
        let left = deadline.remaining().saturating_sub(STEP_FLOOR);
        SHOW_WAIT.min(left).max(submit_delay)
    } else {
        submit_delay
    };
    let shown = watch_prompt(mux, pane, prompt, show_wait, prompt_shown, |input| {
        shows_all(text, input)
    })
    .await;
    mux.submit(pane, deadline).await?;
    // Confirmed wherever a prompt line can be read, also when the text had not shown yet (a
    // slow TUI): it may show only now, and must then leave.
    if let Some(shown) = shown {
        confirm_submitted(mux, pane, prompt, text, shown).await?;
    }
    Ok(M::NAME)
}

/// Live if a process on the pane's terminal holds `file` open; else another session, or none,
/// runs there, or (no `/proc`, a zellij pane) which one cannot be told.
async fn held_open<M: Mux>(
    mux: &M,
    pane: &M::Pane,
    file: &Path,
    deadline: Deadline,
) -> Result<PaneState, MuxError> {
    let pids = mux.terminal_pids(pane, deadline).await?;
    Ok(match pids.and_then(|pids| ps::holding_open(&pids, file)) {
        Some(true) => PaneState::Live,
        Some(false) => PaneState::Stale(StaleReason::AnotherSession),
        None => PaneState::Stale(StaleReason::Unreadable {
            detail: format!(
                "which session runs in a {} pane cannot be read on this system",
                M::NAME
            ),
        }),
    })
}

async fn guarded_screen<M: Mux>(
    mux: &M,
    pane: &M::Pane,
    deadline: Deadline,
) -> Result<Option<String>, InjectError> {
    match mux.check_pane(pane, deadline).await? {
        PaneState::Stale(reason) => Err(InjectError::StalePane { reason }),
        _ => Ok(mux.screen(pane, deadline).await?),
    }
}

async fn guarded_pick<M: Mux>(
    mux: &M,
    pane: &M::Pane,
    locate: fn(&str) -> Option<u8>,
    deadline: Deadline,
) -> Result<bool, InjectError> {
    let screen = guarded_screen(mux, pane, deadline).await?;
    let Some(number) = screen.as_deref().and_then(locate) else {
        return Ok(false);
    };
    mux.type_text(pane, &KeystrokeText::option_number(number), deadline)
        .await?;
    let until = Deadline::after(CONFIRM_WAIT);
    loop {
        tokio::time::sleep(READ_GAP).await;
        match mux.screen(pane, until).await {
            Ok(Some(screen)) if locate(&screen).is_none() => return Ok(true),
            _ if until.remaining() <= READ_GAP => return Err(InjectError::Unsubmitted),
            _ => {}
        }
    }
}

/// What the screen of a live pane says: held (a menu, a running turn), occupied, or free.
fn screen_state(seen: ScreenReading) -> PaneState {
    if let Some(menu) = seen.modal {
        return PaneState::Held(menu);
    }
    // The busy marker's hook may not have run yet (it fires as the turn starts, and a hook
    // process takes milliseconds); the screen already shows it.
    if seen.turn_running {
        return PaneState::Held("a running turn");
    }
    seen.draft
        .map_or(PaneState::Live, |input| PaneState::Occupied { input })
}

/// After an Enter: the text must leave the prompt line within [`CONFIRM_WAIT`], else one more
/// Enter and [`LAST_CONFIRM_WAIT`]. It has left once a read without it follows one with it
/// (`seen`: it showed before the Enter); a text never seen, or an unreadable screen, says nothing.
async fn confirm_submitted<M: Mux>(
    mux: &M,
    pane: &M::Pane,
    prompt: &PromptReader,
    text: &KeystrokeText,
    seen: bool,
) -> Result<(), InjectError> {
    // Read and set only by this task, but the future must be Send.
    let seen = std::sync::atomic::AtomicBool::new(seen);
    for (again, within) in [(true, CONFIRM_WAIT), (false, LAST_CONFIRM_WAIT)] {
        let gone = watch_prompt(mux, pane, prompt, within, true, |input| {
            let holds = still_holds(prompt, text, input);
            let was_seen = seen.fetch_or(holds, Ordering::Relaxed) || holds;
            was_seen && !holds
        })
        .await;
        if gone != Some(false) || !seen.load(Ordering::Relaxed) {
            return Ok(());
        }
        if again {
            tracing::debug!("the typed text is still on the prompt line; pressing Enter again");
            mux.submit(pane, Deadline::after(STEP_FLOOR)).await?;
        }
    }
    Err(InjectError::Unsubmitted)
}

/// Reads the prompt line every [`READ_GAP`] until `wanted` holds (`Some(true)`) or `within` has
/// passed (`Some(false)`); `None`, after sleeping out `within`, when no prompt line shows. A
/// failed read, or one without a prompt line where the pane shows one (`prompt_shown`), is tried
/// again: a lost reply or a frame mid-redraw must not pass a dropped Enter for a submit.
async fn watch_prompt<M: Mux>(
    mux: &M,
    pane: &M::Pane,
    prompt: &PromptReader,
    within: Duration,
    prompt_shown: bool,
    wanted: impl Fn(Option<&str>) -> bool,
) -> Option<bool> {
    let until = Deadline::after(within);
    loop {
        let prompt = match mux.screen(pane, until).await {
            Ok(Some(screen)) if (prompt.shown)(&screen) => {
                if wanted((prompt.draft)(&screen).as_deref()) {
                    return Some(true);
                }
                true
            }
            Err(_) => false,
            Ok(Some(_)) if prompt_shown => false,
            Ok(_) => {
                tokio::time::sleep_until(until.instant()).await;
                return None;
            }
        };
        if until.remaining() <= READ_GAP {
            return prompt.then_some(false);
        }
        tokio::time::sleep(READ_GAP).await;
    }
}

/// The prompt line shows all of `text`, or (wrapped) its first line up to a word's end.
fn shows_all(text: &KeystrokeText, input: Option<&str>) -> bool {
    let rest = input.and_then(|shown| text.as_str().strip_prefix(shown));
    rest.is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
}

/// The prompt line still holds (part of) `text`, or the marker of it taken as a paste.
fn still_holds(prompt: &PromptReader, text: &KeystrokeText, input: Option<&str>) -> bool {
    let pasted = |shown: &str| prompt.paste_marker.is_some_and(|m| shown.starts_with(m));
    input.is_some_and(|shown| text.as_str().starts_with(shown) || pasted(shown))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex as StdMutex;

    #[test]
    fn every_kind_is_listed() {
        let all = [
            InjectError::StalePane {
                reason: StaleReason::PaneMissing,
            },
            InjectError::Occupied,
            InjectError::Held("copy mode"),
            InjectError::Limited(Notice {
                kind: "session limit".into(),
                resets: None,
            }),
            InjectError::Unsubmitted,
            InjectError::PaneBusy {
                waited: Duration::ZERO,
            },
            InjectError::Failed(MuxError::BudgetSpent {
                left: Duration::ZERO,
            }),
        ];
        let listed: Vec<&str> = InjectError::kinds().collect();
        for error in &all {
            assert!(listed.contains(&error.kind()), "{}", error.kind());
        }
    }

    /// A backend that records the steps and the budget each got, sleeping `step` per call.
    /// With `readable`, its screen is an input box whose line shows what was typed, and an
    /// Enter clears it unless `dropped_enters` says to drop it.
    struct Scripted {
        stale: Option<StaleReason>,
        step: Duration,
        calls: StdMutex<Vec<(&'static str, Duration)>>,
        readable: bool,
        input: StdMutex<String>,
        dropped_enters: StdMutex<u32>,
        /// How long typed text takes to show on the screen (a slow TUI).
        echo_delay: Duration,
        typed_at: StdMutex<Option<Instant>>,
        /// Reads after an Enter that fail, as zellij's do when its client loses the reply.
        lost_reads: StdMutex<u32>,
        /// Reads after the typing that show no prompt line: an empty dump (zellij losing the
        /// reply) or a frame caught mid-redraw.
        blank_reads: StdMutex<u32>,
        /// Reads before the typing that show no prompt line (a frame caught mid-redraw).
        blank_reads_before_typing: StdMutex<u32>,
        /// From the first Enter on, the screen shows no prompt line (something took it over).
        promptless_after_enter: bool,
        entered: std::sync::atomic::AtomicBool,
    }

    impl Scripted {
        fn new(step: Duration) -> Self {
            Self {
                stale: None,
                step,
                calls: StdMutex::new(Vec::new()),
                readable: false,
                input: StdMutex::new(String::new()),
                dropped_enters: StdMutex::new(0),
                echo_delay: Duration::ZERO,
                typed_at: StdMutex::new(None),
                lost_reads: StdMutex::new(0),
                blank_reads: StdMutex::new(0),
                blank_reads_before_typing: StdMutex::new(0),
                promptless_after_enter: false,
                entered: std::sync::atomic::AtomicBool::new(false),
            }
        }

        fn readable(step: Duration, dropped_enters: u32) -> Self {
            Self {
                readable: true,
                dropped_enters: StdMutex::new(dropped_enters),
                ..Self::new(step)
            }
        }

        async fn call(&self, name: &'static str, deadline: Deadline) -> Result<(), MuxError> {
            let budget = deadline.step_budget(STEP_FLOOR);
            self.calls.lock().unwrap().push((name, budget));
            if self.step > budget {
                tokio::time::sleep(budget).await;
                return Err(MuxError::Timeout {
                    label: name,
                    after: budget,
                });
            }
            tokio::time::sleep(self.step).await;
            Ok(())
        }

        fn names(&self) -> Vec<&'static str> {
            self.calls.lock().unwrap().iter().map(|c| c.0).collect()
        }
    }

    impl Mux for Scripted {
        type Pane = str;
        const NAME: &'static str = "scripted";
        async fn check_pane(&self, _: &str, deadline: Deadline) -> Result<PaneState, MuxError> {
            self.call("guard", deadline).await?;
            Ok(match &self.stale {
                Some(reason) => PaneState::Stale(reason.clone()),
                None => PaneState::Live,
            })
        }
        async fn type_text(
            &self,
            _: &str,
            text: &KeystrokeText,
            deadline: Deadline,
        ) -> Result<(), MuxError> {
            self.call("type", deadline).await?;
            text.as_str().clone_into(&mut self.input.lock().unwrap());
            *self.typed_at.lock().unwrap() = Some(Instant::now());
            Ok(())
        }
        async fn screen(&self, _: &str, _: Deadline) -> Result<Option<String>, MuxError> {
            let mut lost = self.lost_reads.lock().unwrap();
            if self.entered.load(Ordering::Relaxed) && *lost > 0 {
                *lost -= 1;
                return Err(MuxError::Timeout {
                    label: "screen",
                    after: STEP_FLOOR,
                });
            }
            drop(lost);
            let typed = self.typed_at.lock().unwrap().is_some();
            let mut before = self.blank_reads_before_typing.lock().unwrap();
            if !typed && *before > 0 {
                *before -= 1;
                return Ok(Some(String::new()));
            }
            drop(before);
            let mut blank = self.blank_reads.lock().unwrap();
            if typed && *blank > 0 {
                *blank -= 1;
                return Ok(Some(String::new()));
            }
            drop(blank);
            if self.promptless_after_enter && self.entered.load(Ordering::Relaxed) {
                return Ok(Some("Loading the session…\n".into()));
            }
            let echoed = self
                .typed_at
                .lock()
                .unwrap()
                .is_none_or(|at| at.elapsed() >= self.echo_delay);
            let input = if echoed {
                self.input.lock().unwrap().clone()
            } else {
                String::new()
            };
            Ok(self
                .readable
                .then(|| format!("done\n──────────\n❯\u{a0}{input}\n──────────\n")))
        }
        async fn submit(&self, _: &str, deadline: Deadline) -> Result<(), MuxError> {
            self.call("submit", deadline).await?;
            self.entered.store(true, Ordering::Relaxed);
            let mut dropped = self.dropped_enters.lock().unwrap();
            if *dropped > 0 {
                *dropped -= 1;
            } else {
                self.input.lock().unwrap().clear();
            }
            Ok(())
        }
    }

    const DELAY: Duration = Duration::from_millis(500);

    /// Claude Code's prompt, which the scripted screens draw.
    fn claude() -> PromptReader {
        crate::agent::Agent::Claude.side().prompt()
    }

    #[test]
    fn inject_future_is_send_so_handlers_can_spawn_it() {
        fn assert_send<T: Send>(_: &T) {}
        let injector = Injector::new(&MuxConfig::default());
        let target = PaneTarget::Tmux {
            pane: "%1".into(),
            session: None,
        };
        let text = KeystrokeText::wake_prompt();
        let claude = claude();
        let future = injector.inject(
            &claude,
            None,
            &target,
            &text,
            Deadline::after(super::super::INJECT_BUDGET),
        );
        assert_send(&future);
    }

    #[tokio::test]
    async fn lock_map_forgets_panes_nobody_holds() {
        let injector = Injector::new(&MuxConfig::default());
        let deadline = Deadline::after(Duration::from_secs(1));
        for n in 0..50 {
            let target = PaneTarget::Tmux {
                pane: format!("%{n}"),
                session: None,
            };
            drop(injector.lock_pane(&target, deadline).await.unwrap());
        }
        assert!(injector.locks.lock().unwrap().len() <= 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_pane_held_past_the_deadline_is_busy_not_typed() {
        let injector = Injector::new(&MuxConfig::default());
        let target = PaneTarget::Zellij {
            pane: "0".into(),
            session: "s".into(),
        };
        let held = injector
            .lock_pane(&target, Deadline::after(Duration::from_secs(1)))
            .await
            .unwrap();
        let err = injector
            .inject(
                &claude(),
                None,
                &target,
                &KeystrokeText::wake_prompt(),
                Deadline::after(Duration::from_millis(300)),
            )
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "pane-busy");
        drop(held);
    }

    #[tokio::test(start_paused = true)]
    async fn runs_guard_type_pause_submit_in_order() {
        let mux = Scripted::new(Duration::from_millis(10));
        let start = Instant::now();
        let name = inject_into(&mux).await.unwrap();
        assert_eq!(name, "scripted");
        assert_eq!(mux.names(), ["guard", "type", "submit"]);
        assert_eq!(start.elapsed(), Duration::from_millis(530));
    }

    #[tokio::test(start_paused = true)]
    async fn a_pane_whose_holder_cannot_be_told_is_not_typed_into() {
        let mux = Scripted::new(Duration::from_millis(10));
        let transcript = Path::new("/nonexistent/rollout.jsonl");
        let deadline = Deadline::after(Duration::from_secs(2));
        let text = KeystrokeText::wake_prompt();
        let err = guarded_inject(
            &mux,
            "%1",
            &claude(),
            Some(transcript),
            &text,
            DELAY,
            deadline,
        )
        .await
        .unwrap_err();
        assert!(
            matches!(
                &err,
                InjectError::StalePane {
                    reason: StaleReason::Unreadable { .. }
                }
            ),
            "{err}"
        );
        assert_eq!(mux.names(), ["guard"], "nothing typed");
    }

    async fn inject_into(mux: &Scripted) -> Result<&'static str, InjectError> {
        let deadline = Deadline::after(Duration::from_secs(2));
        guarded_inject(
            mux,
            "%1",
            &claude(),
            None,
            &KeystrokeText::wake_prompt(),
            DELAY,
            deadline,
        )
        .await
    }

    #[tokio::test(start_paused = true)]
    async fn enter_goes_as_soon_as_the_text_shows_and_its_submit_is_confirmed() {
        let mux = Scripted::readable(Duration::from_millis(10), 0);
        let start = Instant::now();
        assert_eq!(inject_into(&mux).await.unwrap(), "scripted");
        assert_eq!(mux.names(), ["guard", "type", "submit"]);
        // Guard, type, submit: no submit delay waited.
        assert_eq!(start.elapsed(), Duration::from_millis(30));
        assert!(mux.input.lock().unwrap().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_enter_is_pressed_once_more_after_the_confirm_wait() {
        let mux = Scripted::readable(Duration::from_millis(10), 1);
        let start = Instant::now();
        assert_eq!(inject_into(&mux).await.unwrap(), "scripted");
        assert_eq!(mux.names(), ["guard", "type", "submit", "submit"]);
        // The second Enter goes one confirm wait (to within one read gap) after the first.
        let elapsed = start.elapsed();
        assert!(
            elapsed >= Duration::from_millis(40) + CONFIRM_WAIT - READ_GAP,
            "{elapsed:?}"
        );
        assert!(
            elapsed <= Duration::from_millis(40) + CONFIRM_WAIT,
            "{elapsed:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn reads_lost_or_blank_around_a_dropped_enter_do_not_pass_for_a_submit() {
        // Two failed reads after the first Enter (zellij losing the reply), or three empty
        // screens after the typing (before and after the first Enter); then the text still
        // there: one more Enter, and then it was gone.
        for mux in [
            Scripted {
                lost_reads: StdMutex::new(2),
                ..Scripted::readable(Duration::from_millis(10), 1)
            },
            Scripted {
                blank_reads: StdMutex::new(3),
                ..Scripted::readable(Duration::from_millis(10), 1)
            },
        ] {
            assert_eq!(inject_into(&mux).await.unwrap(), "scripted");
            assert_eq!(mux.names(), ["guard", "type", "submit", "submit"]);
            assert!(mux.input.lock().unwrap().is_empty());
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_frame_caught_mid_redraw_before_typing_is_read_again() {
        // An earlier attempt left the text unsubmitted; the first look catches a cleared frame.
        let mux = Scripted {
            blank_reads_before_typing: StdMutex::new(1),
            ..Scripted::readable(Duration::from_millis(10), 0)
        };
        *mux.input.lock().unwrap() = KeystrokeText::wake_prompt().as_str().to_owned();
        assert_eq!(inject_into(&mux).await.unwrap(), "scripted");
        // Submitted as it stood, not typed a second time after it.
        assert_eq!(mux.names(), ["guard", "submit"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_screen_that_keeps_showing_no_prompt_line_gets_no_second_enter() {
        // Something took the screen over after the Enter: with no prompt line to read there is
        // nothing to confirm, and an Enter could answer whatever it is, so none more goes.
        let mux = Scripted {
            promptless_after_enter: true,
            ..Scripted::readable(Duration::from_millis(10), 1)
        };
        assert_eq!(inject_into(&mux).await.unwrap(), "scripted");
        assert_eq!(mux.names(), ["guard", "type", "submit"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_tui_that_shows_the_text_late_still_gets_its_submit_confirmed() {
        let mux = Scripted {
            echo_delay: DELAY + Duration::from_millis(100),
            ..Scripted::readable(Duration::from_millis(10), 1)
        };
        assert_eq!(inject_into(&mux).await.unwrap(), "scripted");
        // The text showed only after the first Enter (which was lost), and then stayed: one
        // more Enter.
        assert_eq!(mux.names(), ["guard", "type", "submit", "submit"]);
        assert!(mux.input.lock().unwrap().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn text_that_stays_after_two_enters_is_reported_unsubmitted() {
        let mux = Scripted::readable(Duration::from_millis(10), 2);
        let err = inject_into(&mux).await.unwrap_err();
        assert_eq!(err.kind(), "unsubmitted");
        assert_eq!(mux.names(), ["guard", "type", "submit", "submit"]);
    }

    #[test]
    fn the_prompt_line_shows_all_of_a_text_or_its_first_wrapped_line() {
        let text = KeystrokeText::wake_prompt();
        assert!(shows_all(&text, Some(WAKE_PROMPT_FOR_TESTS)));
        assert!(shows_all(&text, Some("Check the event bus - a directed")));
        assert!(!shows_all(&text, Some("Check the event bus - a direc")));
        assert!(!shows_all(&text, Some("a draft of someone else")));
        assert!(!shows_all(&text, None));
        assert!(still_holds(&claude(), &text, Some("Check the")));
        assert!(still_holds(
            &claude(),
            &text,
            Some("[Pasted text #1 +0 lines]")
        ));
        assert!(!still_holds(&claude(), &text, None));
        assert!(!still_holds(
            &claude(),
            &text,
            Some("a draft of someone else")
        ));
    }

    const WAKE_PROMPT_FOR_TESTS: &str = super::super::WAKE_PROMPT;

    #[tokio::test(start_paused = true)]
    async fn stale_pane_types_nothing() {
        let mut mux = Scripted::new(Duration::from_millis(10));
        mux.stale = Some(StaleReason::PaneDead);
        let err = inject_into(&mux).await.unwrap_err();
        assert_eq!(err.kind(), "stale");
        assert_eq!(mux.names(), ["guard"]);
    }

    #[tokio::test(start_paused = true)]
    async fn slow_guard_leaves_no_room_so_nothing_is_typed() {
        let mux = Scripted::new(Duration::from_millis(1800));
        let start = Instant::now();
        let err = inject_into(&mux).await.unwrap_err();
        assert_eq!(err.kind(), "timeout");
        assert!(matches!(
            err,
            InjectError::Failed(MuxError::BudgetSpent { .. })
        ));
        assert_eq!(mux.names(), ["guard"]);
        assert_eq!(start.elapsed(), Duration::from_millis(1800));
    }

    #[tokio::test(start_paused = true)]
    async fn slow_steps_never_exceed_budget_plus_one_floor() {
        // Each call takes 700 ms: guard 0.7, typing 0.7, pause 0.5, then the submit is cut
        // at its floor. Whatever the step length, the total stays within 2.0 + 0.25 s.
        for step_ms in [100, 400, 700, 900, 1200, 1300, 2500] {
            let mux = Scripted::new(Duration::from_millis(step_ms));
            let start = Instant::now();
            let _ = inject_into(&mux).await;
            let took = start.elapsed();
            assert!(
                took <= Duration::from_millis(2250),
                "step {step_ms} ms took {took:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_submit_gets_only_what_typing_left_but_at_least_the_floor() {
        let mux = Scripted::new(Duration::from_millis(600));
        let outcome = inject_into(&mux).await;
        // The 0.6 s submit does not fit its 0.3 s: it times out, after the text was typed.
        assert_eq!(outcome.unwrap_err().kind(), "timeout");
        let calls = mux.calls.lock().unwrap().clone();
        assert_eq!(calls[0], ("guard", Duration::from_secs(2)));
        // 1.4 s left after the guard, minus the 0.5 s pause reserved for the submit.
        assert_eq!(calls[1], ("type", Duration::from_millis(900)));
        // 2.0 - 0.6 - 0.6 - 0.5 = 0.3 s left.
        assert_eq!(calls[2], ("submit", Duration::from_millis(300)));
        assert!(calls[2].1 < calls[1].1);
    }
}
