//! The idle decision, pure: what a poll saw ([`Observation`]), the state it says ([`classify`])
//! and whether anything moved ([`Activity`]). A session is idle only when nothing moved for
//! `idle_after` AND a positive idle signal holds: trusting silence alone nudges a thinking
//! session. A movement stamped within the grace after wakebridge's own typing is its echo, not
//! the session answering; so is a hook event that reports the session waiting.

use crate::api::SessionState;
use crate::reading::hook::HookKind;
use crate::reading::registry::{RegistryReading, RegistryStatus};
use crate::reading::screen::{ScreenReading, Title};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    pub size: u64,
    pub mtime_ms: i64,
}

/// What one poll saw of one session; `None`: the signal is not available.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observation {
    pub busy_marker: bool,
    pub title: Option<Title>,
    pub window_activity_s: Option<u64>,
    pub screen: Option<ScreenReading>,
    pub transcript: Option<FileStamp>,
    pub hook: Option<(HookKind, i64)>,
    pub registry: Option<RegistryReading>,
}

impl Observation {
    /// A busy marker contradicted by a current idle signal: an Esc interrupt fires no hook, so
    /// its marker stays. Only an owed wake reads it as stale (a bus event does not wait an
    /// hour); a nudge does not, the marker being the one signal set at a turn's very start.
    pub fn stale_marker(&self) -> bool {
        let idle_now = self.title == Some(Title::Idle)
            || self
                .registry
                .as_ref()
                .is_some_and(|r| r.status == RegistryStatus::Idle);
        self.busy_marker && idle_now
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Idle(&'static str),
    Busy(&'static str),
    /// A dialog or question waits for a human: typing would answer it.
    Dialog(&'static str),
    /// Text sits at the prompt (a human's draft): typing would submit it.
    Draft,
    Unknown(&'static str),
}

impl Verdict {
    /// Unknown reads as idle: nothing says a turn runs, and nothing is typed on it alone.
    pub fn state(self) -> SessionState {
        match self {
            Verdict::Idle(_) | Verdict::Unknown(_) => SessionState::Idle,
            Verdict::Busy(_) => SessionState::Working,
            Verdict::Dialog(_) => SessionState::Dialog,
            Verdict::Draft => SessionState::Draft,
        }
    }

    pub fn describe(self) -> String {
        match self {
            Verdict::Idle(why) => format!("idle ({why})"),
            Verdict::Busy(why) => format!("busy ({why})"),
            Verdict::Dialog(why) => format!("waiting on a dialog ({why})"),
            Verdict::Draft => "text typed at the prompt".into(),
            Verdict::Unknown(why) => format!("unknown ({why})"),
        }
    }
}

/// The state right now. Never idle: a fresh busy marker, registry `waiting`/`busy`, a dialog on
/// screen, a busy title glyph or spinner, a permission notification. Idle needs one of: hook
/// `Stop`/`StopFailure`/`idle_prompt`, registry `idle`, the `✳` title.
pub fn classify(obs: &Observation) -> Verdict {
    let registry = obs.registry.as_ref();
    let registry_idle_after = |ms: i64| {
        registry.is_some_and(|r| {
            r.status == RegistryStatus::Idle && r.updated_ms.is_some_and(|at| at > ms)
        })
    };
    if obs.busy_marker {
        return Verdict::Busy("busy marker");
    }
    if registry.is_some_and(|r| r.status == RegistryStatus::Waiting) {
        return Verdict::Dialog("registry: waiting");
    }
    if obs.screen.as_ref().is_some_and(|s| s.dialog) {
        return Verdict::Dialog("dialog on screen");
    }
    if obs.screen.as_ref().is_some_and(|s| s.draft.is_some()) {
        return Verdict::Draft;
    }
    if let Some((HookKind::Waiting, seen_ms)) = obs.hook
        && !registry_idle_after(seen_ms)
    {
        return Verdict::Dialog("hook: dialog notification");
    }
    if obs.title == Some(Title::Busy) {
        return Verdict::Busy("title: busy glyph");
    }
    if registry.is_some_and(|r| r.status == RegistryStatus::Busy) {
        return Verdict::Busy("registry: busy");
    }
    if obs.screen.as_ref().is_some_and(|s| s.turn_running) {
        return Verdict::Busy("spinner on screen");
    }
    let current_idle = obs.title == Some(Title::Idle)
        || registry.is_some_and(|r| r.status == RegistryStatus::Idle);
    match obs.hook {
        // Esc interrupts fire no hook: a current idle signal overrides a stale "working".
        Some((HookKind::Working, _)) if !current_idle => {
            return Verdict::Busy("hook: turn running");
        }
        Some((HookKind::Ended, _)) => return Verdict::Unknown("hook: session ended"),
        Some((HookKind::TurnEnded, _)) => return Verdict::Idle("hook: turn ended"),
        Some((HookKind::IdlePrompt, _)) => return Verdict::Idle("hook: idle prompt"),
        _ => {}
    }
    if registry.is_some_and(|r| r.status == RegistryStatus::Idle) {
        return Verdict::Idle("registry: idle");
    }
    if obs.title == Some(Title::Idle) {
        return Verdict::Idle("title: idle glyph");
    }
    Verdict::Unknown("no idle signal")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Movement {
    /// Nothing moved, or only within the grace window after our own typing.
    Still,
    /// The session showed life: `at_ms` is its earliest new sign, so an answer is dated by it
    /// (a later sign the same look saw, a registry update say, is not when it answered).
    Real { signal: &'static str, at_ms: i64 },
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Activity {
    window_activity_s: Option<u64>,
    hook_seen_ms: Option<i64>,
    transcript: Option<FileStamp>,
    registry_ms: Option<i64>,
    screen_hash: Option<u64>,
    screen_at_ms: Option<i64>,
    quiet_since_ms: i64,
}

impl Activity {
    /// The first observation: the baseline, quiet from now on. For a session nudged before a
    /// restart, a signal newer than that nudge plus the grace is activity nobody watched.
    pub fn first(
        obs: &Observation,
        now_ms: i64,
        restored_nudge_ms: Option<i64>,
        grace_ms: i64,
    ) -> (Self, Movement) {
        let mut activity = Activity {
            quiet_since_ms: now_ms,
            ..Activity::default()
        };
        // Signals up to the nudge's grace are the nudge's own echo, as after our typing.
        let movement = match activity.observe(obs, now_ms, restored_nudge_ms, grace_ms) {
            moved @ Movement::Real { .. } if restored_nudge_ms.is_some() => moved,
            _ => Movement::Still,
        };
        (activity, movement)
    }

    pub fn quiet_since_ms(&self) -> i64 {
        self.quiet_since_ms
    }

    /// Compares `obs` with the previous fingerprints and keeps the new ones; a real movement
    /// also moves the quiet clock, to its latest sign.
    pub fn observe(
        &mut self,
        obs: &Observation,
        now_ms: i64,
        typed_ms: Option<i64>,
        grace_ms: i64,
    ) -> Movement {
        // A timestamped movement is ours when it happened no later than grace after our typing.
        let ours =
            |at_ms: i64| typed_ms.is_some_and(|typed| at_ms <= typed.saturating_add(grace_ms));
        let mut timed: Vec<(&'static str, i64)> = Vec::new();
        let baseline_known = self.has_baseline();
        // A session whose hooks report shows its life through them; its pane's output does not:
        // Claude Code redraws by itself while idle.
        let pane_shows_life = obs.hook.is_none();
        if let Some(now) = obs.window_activity_s {
            if self.window_activity_s.is_none_or(|before| now > before) && pane_shows_life {
                let at = i64::try_from(now).unwrap_or(i64::MAX).saturating_mul(1000);
                timed.push(("window activity", at));
            }
            self.window_activity_s = Some(now);
        }
        if let Some((kind, seen)) = obs.hook {
            if self.hook_seen_ms.is_none_or(|before| seen > before) && kind.shows_life() {
                timed.push(("hook event", seen));
            }
            self.hook_seen_ms = Some(seen);
        }
        if let Some(stamp) = obs.transcript {
            if self.transcript != Some(stamp) {
                timed.push(("transcript", stamp.mtime_ms));
            }
            self.transcript = Some(stamp);
        }
        if let Some(updated) = obs.registry.as_ref().and_then(|r| r.updated_ms) {
            if self.registry_ms.is_none_or(|before| updated > before) {
                timed.push(("registry status", updated));
            }
            self.registry_ms = Some(updated);
        }
        let mut screen_moved_by_others = false;
        if let Some(screen) = &obs.screen {
            if let (Some(before), Some(captured_at)) = (self.screen_hash, self.screen_at_ms)
                && before != screen.hash
                && pane_shows_life
            {
                screen_moved_by_others = typed_ms.is_none_or(|typed| typed < captured_at);
            }
            self.screen_hash = Some(screen.hash);
            self.screen_at_ms = Some(now_ms);
        }
        // Absorbing the baseline itself, every sign counts: the caller decides what it means.
        let baseline = !baseline_known && typed_ms.is_none();
        let real: Vec<_> = timed
            .iter()
            .filter(|(_, at)| baseline || !ours(*at))
            .collect();
        if let Some((_, latest)) = real.iter().max_by_key(|(_, at)| *at) {
            self.quiet_since_ms = self.quiet_since_ms.max((*latest).min(now_ms));
        }
        if let Some(&&(signal, at_ms)) = real.iter().min_by_key(|(_, at)| *at) {
            return Movement::Real { signal, at_ms };
        }
        if screen_moved_by_others && !baseline {
            self.quiet_since_ms = self.quiet_since_ms.max(now_ms);
            return Movement::Real {
                signal: "screen",
                at_ms: now_ms,
            };
        }
        Movement::Still
    }

    fn has_baseline(&self) -> bool {
        self.window_activity_s.is_some()
            || self.hook_seen_ms.is_some()
            || self.transcript.is_some()
            || self.registry_ms.is_some()
            || self.screen_hash.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: i64 = 10_000;

    /// An idle session without hooks: its pane's output is all there is to see life by.
    fn idle_tmux(activity_s: u64) -> Observation {
        Observation {
            title: Some(Title::Idle),
            window_activity_s: Some(activity_s),
            ..Observation::default()
        }
    }

    fn registry(status: RegistryStatus, updated_ms: i64) -> Option<RegistryReading> {
        Some(RegistryReading {
            status,
            updated_ms: Some(updated_ms),
            inbox: None,
        })
    }

    #[test]
    fn idle_needs_a_positive_signal_and_unknown_title_is_not_one() {
        let silent = Observation {
            title: Some(Title::Unknown),
            window_activity_s: Some(5),
            ..Observation::default()
        };
        assert!(matches!(classify(&silent), Verdict::Unknown(_)));
        assert!(matches!(
            classify(&Observation::default()),
            Verdict::Unknown(_)
        ));
        for obs in [
            Observation {
                title: Some(Title::Idle),
                ..Observation::default()
            },
            Observation {
                hook: Some((HookKind::TurnEnded, 1)),
                ..Observation::default()
            },
            Observation {
                hook: Some((HookKind::IdlePrompt, 1)),
                ..Observation::default()
            },
            Observation {
                registry: registry(RegistryStatus::Idle, 1),
                ..Observation::default()
            },
        ] {
            assert!(matches!(classify(&obs), Verdict::Idle(_)), "{obs:?}");
        }
    }

    #[test]
    fn never_idle_signals_win_over_idle_ones() {
        let base = idle_tmux(5);
        let cases = [
            Observation {
                busy_marker: true,
                ..base.clone()
            },
            Observation {
                registry: registry(RegistryStatus::Waiting, 9),
                ..base.clone()
            },
            Observation {
                title: Some(Title::Busy),
                ..base.clone()
            },
            Observation {
                registry: registry(RegistryStatus::Busy, 9),
                ..base.clone()
            },
            Observation {
                screen: Some(
                    crate::agent::Agent::Claude
                        .side()
                        .read_screen("Do you want to make this edit?\n❯ 1. Yes\n  2. No\n"),
                ),
                ..base.clone()
            },
            Observation {
                screen: Some(
                    crate::agent::Agent::Claude
                        .side()
                        .read_screen("✻ Tinkering… (esc to interrupt)\n"),
                ),
                ..base.clone()
            },
            Observation {
                hook: Some((HookKind::Waiting, 5)),
                ..base.clone()
            },
        ];
        for obs in cases {
            assert!(
                matches!(
                    classify(&obs),
                    Verdict::Busy(_) | Verdict::Dialog(_) | Verdict::Draft
                ),
                "{obs:?} -> {:?}",
                classify(&obs)
            );
        }
    }

    #[test]
    fn a_running_turn_by_hook_yields_to_a_current_idle_signal() {
        let working = Observation {
            hook: Some((HookKind::Working, 5)),
            ..Observation::default()
        };
        assert!(matches!(classify(&working), Verdict::Busy(_)));
        let interrupted = Observation {
            title: Some(Title::Idle),
            ..working.clone()
        };
        assert_eq!(classify(&interrupted), Verdict::Idle("title: idle glyph"));
        let permission_then_idle = Observation {
            hook: Some((HookKind::Waiting, 5)),
            registry: registry(RegistryStatus::Idle, 6),
            ..Observation::default()
        };
        assert_eq!(
            classify(&permission_then_idle),
            Verdict::Idle("registry: idle")
        );
    }

    #[test]
    fn text_at_the_prompt_blocks_a_nudge() {
        let screen = |input: &str| {
            format!("Done.\n\n────────────\n❯\u{a0}{input}\n────────────\n  ⏸ manual mode on\n")
        };
        let mut obs = idle_tmux(100);
        obs.screen = Some(
            crate::agent::Agent::Claude
                .side()
                .read_screen(&screen("my own words")),
        );
        assert_eq!(classify(&obs), Verdict::Draft);
        obs.screen = Some(crate::agent::Agent::Claude.side().read_screen(&screen("")));
        assert!(matches!(classify(&obs), Verdict::Idle(_)));
    }

    #[test]
    fn activity_from_others_resets_the_quiet_clock() {
        let (mut activity, first) = Activity::first(&idle_tmux(100), 200_000, None, GRACE);
        assert_eq!(first, Movement::Still);
        assert_eq!(activity.quiet_since_ms(), 200_000);
        assert_eq!(
            activity.observe(&idle_tmux(100), 210_000, None, GRACE),
            Movement::Still
        );
        let moved = activity.observe(&idle_tmux(215), 220_000, None, GRACE);
        assert_eq!(
            moved,
            Movement::Real {
                signal: "window activity",
                at_ms: 215_000
            }
        );
        assert_eq!(activity.quiet_since_ms(), 215_000);
    }

    #[test]
    fn our_own_typing_echo_is_not_activity_but_later_work_is() {
        let (mut activity, _) = Activity::first(&idle_tmux(100), 200_000, None, GRACE);
        let typed = Some(300_000);
        // The echo of our keystrokes and Claude's UserPromptSubmit, within the grace.
        let mut echo = idle_tmux(301);
        echo.hook = Some((HookKind::Working, 300_500));
        assert_eq!(
            activity.observe(&echo, 305_000, typed, GRACE),
            Movement::Still
        );
        assert_eq!(activity.quiet_since_ms(), 200_000, "quiet clock untouched");
        // The agent keeps working past the grace: that answers the nudge.
        let work = idle_tmux(325);
        assert!(matches!(
            activity.observe(&work, 330_000, typed, GRACE),
            Movement::Real { at_ms: 325_000, .. }
        ));
    }

    #[test]
    fn an_idle_or_dialog_notification_after_the_grace_is_no_sign_of_life() {
        let (mut activity, _) = Activity::first(&idle_tmux(100), 200_000, None, GRACE);
        let typed = Some(300_000);
        // A minute after the nudge's turn ended: Claude Code reports its prompt idle.
        for (kind, at_ms) in [
            (HookKind::IdlePrompt, 360_000),
            (HookKind::Waiting, 420_000),
        ] {
            let mut waiting = idle_tmux(100);
            waiting.hook = Some((kind, at_ms));
            assert_eq!(
                activity.observe(&waiting, at_ms + 500, typed, GRACE),
                Movement::Still,
                "{kind:?}"
            );
        }
        assert_eq!(activity.quiet_since_ms(), 200_000, "quiet clock untouched");
        // A turn running after that is life.
        let mut working = idle_tmux(100);
        working.hook = Some((HookKind::Working, 480_000));
        assert_eq!(
            activity.observe(&working, 480_500, typed, GRACE),
            Movement::Real {
                signal: "hook event",
                at_ms: 480_000
            }
        );
    }

    #[test]
    fn a_hooked_sessions_pane_output_is_no_sign_of_life_but_its_hooks_are() {
        let hooked = |activity_s: u64, screen: &str, hook_ms: i64| Observation {
            title: Some(Title::Idle),
            window_activity_s: Some(activity_s),
            screen: Some(crate::agent::Agent::Claude.side().read_screen(screen)),
            hook: Some((HookKind::TurnEnded, hook_ms)),
            ..Observation::default()
        };
        let (mut activity, _) = Activity::first(&hooked(100, "one\n", 1_000), 200_000, None, GRACE);
        // Claude Code erasing a footer hint on its own, long after our typing.
        assert_eq!(
            activity.observe(&hooked(330, "two\n", 1_000), 331_000, Some(300_000), GRACE),
            Movement::Still
        );
        assert_eq!(activity.quiet_since_ms(), 200_000, "quiet clock untouched");
        assert!(matches!(
            activity.observe(
                &hooked(340, "two\n", 340_000),
                341_000,
                Some(300_000),
                GRACE
            ),
            Movement::Real {
                signal: "hook event",
                at_ms: 340_000
            }
        ));
    }

    #[test]
    fn a_screen_change_spanning_our_typing_is_ours_otherwise_real() {
        let screen = |text: &str| Observation {
            screen: Some(crate::agent::Agent::Claude.side().read_screen(text)),
            ..Observation::default()
        };
        let (mut activity, _) = Activity::first(&screen("one\n"), 100_000, None, GRACE);
        assert_eq!(
            activity.observe(&screen("two\n"), 200_000, Some(150_000), GRACE),
            Movement::Still
        );
        assert_eq!(activity.quiet_since_ms(), 100_000, "quiet clock untouched");
        assert_eq!(
            activity.observe(&screen("three\n"), 300_000, Some(150_000), GRACE),
            Movement::Real {
                signal: "screen",
                at_ms: 300_000
            }
        );
        assert_eq!(
            activity.observe(&screen("three\n"), 400_000, None, GRACE),
            Movement::Still
        );
    }

    #[test]
    fn transcript_growth_and_registry_updates_are_activity() {
        let stamp = |size, mtime_ms| Observation {
            transcript: Some(FileStamp { size, mtime_ms }),
            registry: registry(RegistryStatus::Idle, 50_000),
            ..Observation::default()
        };
        let (mut activity, _) = Activity::first(&stamp(10, 50_000), 100_000, None, GRACE);
        assert!(matches!(
            activity.observe(&stamp(20, 120_000), 130_000, None, GRACE),
            Movement::Real {
                signal: "transcript",
                ..
            }
        ));
        let mut registry_moved = stamp(20, 120_000);
        registry_moved.registry = registry(RegistryStatus::Busy, 140_000);
        assert!(matches!(
            activity.observe(&registry_moved, 150_000, None, GRACE),
            Movement::Real {
                signal: "registry status",
                ..
            }
        ));
    }

    /// A turn that answered a nudge before a restart is dated by its own end, not by a later
    /// sign the same first look saw; the quiet clock still runs from the latest.
    #[test]
    fn an_answer_is_dated_by_its_earliest_sign_after_the_nudge() {
        let obs = Observation {
            hook: Some((HookKind::TurnEnded, 300_000)),
            transcript: Some(FileStamp {
                size: 10,
                mtime_ms: 300_100,
            }),
            registry: registry(RegistryStatus::Idle, 900_000),
            ..Observation::default()
        };
        let (mut activity, moved) = Activity::first(&obs, 1_000_000, Some(200_000), GRACE);
        let dated = Movement::Real {
            signal: "hook event",
            at_ms: 300_000,
        };
        assert_eq!(moved, dated);
        let (_, moved) = Activity::first(&obs, 1_000_000, Some(290_050), GRACE);
        assert_eq!(
            moved,
            Movement::Real {
                signal: "transcript",
                at_ms: 300_100,
            },
            "the hook fell within the nudge's grace"
        );

        let later = Observation {
            hook: Some((HookKind::TurnEnded, 1_100_000)),
            registry: registry(RegistryStatus::Idle, 1_150_000),
            ..obs
        };
        let moved = activity.observe(&later, 1_200_000, None, GRACE);
        assert!(
            matches!(
                moved,
                Movement::Real {
                    at_ms: 1_100_000,
                    ..
                }
            ),
            "{moved:?}"
        );
        assert_eq!(activity.quiet_since_ms(), 1_150_000);
    }

    #[test]
    fn restored_sessions_count_activity_after_their_last_nudge() {
        let obs = idle_tmux(500);
        let (_, moved) = Activity::first(&obs, 600_000, Some(300_000), GRACE);
        assert!(matches!(moved, Movement::Real { .. }));
        let (activity, moved) = Activity::first(&obs, 600_000, Some(495_000), GRACE);
        assert_eq!(moved, Movement::Still, "within grace of the restored nudge");
        assert_eq!(activity.quiet_since_ms(), 600_000);
    }
}
