//! What the launcher presses on a freshly started agent's pane: [`Driver`] turns captures, read
//! by the agent's first-run reader (Claude Code's by default), into keystrokes (Enter, Down, Up and nothing else) with the anti-typeahead pauses, pressing
//! Enter on the trust dialog only when Yes is visibly selected. Pure; on an unknown screen it
//! only waits.

use std::time::Duration;

use crate::claude::screen::first_run::classify;
use crate::mux::Key;
use crate::reading::screen::Screen;

/// Wait this long after a screen first appears before pressing anything: Claude Code ignores
/// keys within 150 ms of a menu's first render (anti-typeahead guard); this leaves room.
pub const SETTLE: Duration = Duration::from_millis(500);
/// After a key, leave an unchanged screen alone this long before pressing again: the key may
/// still be on its way. A key that was dropped (by the typeahead guard) is then sent once more.
pub const RESEND_AFTER: Duration = Duration::from_millis(1500);
/// Most Down/Up presses spent moving the trust dialog's selection to "Yes". The menu has two
/// options, so one press normally suffices; the rest cover presses eaten by the typeahead guard.
pub const MAX_SELECTION_MOVES: u32 = 4;
/// Consecutive captures that must show the idle prompt before it counts as ready, so one frame
/// drawn while the UI settles is not mistaken for it.
pub const READY_CONFIRMATIONS: u32 = 2;

/// The first-run screens the launcher answers, as `screens_passed` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Passed {
    ThemePicker,
    SecurityNotes,
    TrustDialog,
}

/// Why the driver gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Halt {
    /// A screen only a human may answer is up (API key approval, login).
    HumanNeeded(Screen),
    /// Claude Code printed an exit message (declined trust, connectivity failure).
    Exited(Screen),
    CannotSelectYes,
}

/// What to do after a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Wait,
    Press(Key),
    Ready,
    Halt(Halt),
}

/// Decides, capture by capture, which key to press; never on a screen younger than [`SETTLE`].
#[derive(Debug, Clone)]
pub struct Driver {
    /// How the agent's first screens read.
    classify: fn(&str) -> Screen,
    /// The screen up (its kind only: moving the trust dialog's selection does not restart its
    /// settle time, a change of screen does) and since when.
    phase: Option<(std::mem::Discriminant<Screen>, Duration)>,
    /// When the last key was pressed, and on which capture.
    last_press: Option<(Duration, String)>,
    moves: u32,
    ready_streak: u32,
    passed: Vec<Passed>,
}

impl Default for Driver {
    /// A driver of Claude Code's first screens.
    fn default() -> Self {
        Self::reading(classify)
    }
}

impl Driver {
    /// A driver of the screens `classify` reads.
    pub fn reading(classify: fn(&str) -> Screen) -> Self {
        Driver {
            classify,
            phase: None,
            last_press: None,
            moves: 0,
            ready_streak: 0,
            passed: Vec::new(),
        }
    }

    pub fn passed(&self) -> &[Passed] {
        &self.passed
    }

    pub fn step(&mut self, at: Duration, capture: &str) -> Step {
        let screen = (self.classify)(capture);
        let phase = std::mem::discriminant(&screen);
        if self.phase.is_none_or(|(current, _)| current != phase) {
            self.phase = Some((phase, at));
            if !matches!(screen, Screen::TrustDialog { .. }) {
                self.moves = 0;
            }
        }
        self.ready_streak = if screen == Screen::Ready {
            self.ready_streak + 1
        } else {
            0
        };
        match screen {
            Screen::ApiKeyPrompt | Screen::Login | Screen::HooksReview => {
                Step::Halt(Halt::HumanNeeded(screen))
            }
            Screen::Declined | Screen::ConnectFailed => Step::Halt(Halt::Exited(screen)),
            Screen::Ready if self.ready_streak >= READY_CONFIRMATIONS => Step::Ready,
            Screen::Ready | Screen::Blank | Screen::Unknown => Step::Wait,
            // Every screen below takes a key: none is pressed before the screen settles.
            _ if !self.may_press(at, capture) => Step::Wait,
            Screen::ThemePicker => self.enter(at, capture, Passed::ThemePicker),
            Screen::SecurityNotes => self.enter(at, capture, Passed::SecurityNotes),
            Screen::TrustDialog {
                yes_selected: true, ..
            } => self.enter(at, capture, Passed::TrustDialog),
            Screen::TrustDialog {
                yes_below_cursor, ..
            } => self.move_to_yes(at, capture, yes_below_cursor),
        }
    }

    /// May a key be pressed on this capture now? Not before the screen has settled, and not
    /// while the previous key on this very capture may still be in flight.
    fn may_press(&self, at: Duration, capture: &str) -> bool {
        let settled = self
            .phase
            .is_some_and(|(_, since)| at.saturating_sub(since) >= SETTLE);
        let in_flight = (self.last_press.as_ref())
            .is_some_and(|(last, on)| on == capture && at.saturating_sub(*last) < RESEND_AFTER);
        settled && !in_flight
    }

    fn press(&mut self, at: Duration, capture: &str, key: Key) -> Step {
        self.last_press = Some((at, capture.to_owned()));
        Step::Press(key)
    }

    fn enter(&mut self, at: Duration, capture: &str, screen: Passed) -> Step {
        if self.passed.last() != Some(&screen) {
            self.passed.push(screen);
        }
        self.press(at, capture, Key::Enter)
    }

    fn move_to_yes(&mut self, at: Duration, capture: &str, yes_below_cursor: bool) -> Step {
        if self.moves >= MAX_SELECTION_MOVES {
            return Step::Halt(Halt::CannotSelectYes);
        }
        self.moves += 1;
        let key = if yes_below_cursor { Key::Down } else { Key::Up };
        self.press(at, capture, key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claude::screen::fixtures::*;
    use proptest::prelude::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn driver_passes_the_current_first_run_sequence() {
        let mut driver = Driver::default();
        let ready = ready_with_nbsp();
        let script: [(f64, &str, Step); 13] = [
            (0.0, "", Step::Wait),
            (0.25, THEME_B1, Step::Wait),
            (0.5, THEME_B1, Step::Wait),
            (0.75, THEME_B1, Step::Press(Key::Enter)),
            (1.0, SECURITY_B2, Step::Wait),
            (1.5, SECURITY_B2, Step::Press(Key::Enter)),
            (1.75, TRUST_CURRENT_NO, Step::Wait),
            (2.0, TRUST_CURRENT_NO, Step::Wait),
            (2.25, TRUST_CURRENT_NO, Step::Press(Key::Down)),
            (2.5, TRUST_CURRENT_YES, Step::Press(Key::Enter)),
            (2.75, "", Step::Wait),
            (30.0, &ready, Step::Wait),
            (30.25, &ready, Step::Ready),
        ];
        for (at, capture, expected) in script {
            assert_eq!(driver.step(secs(at), capture), expected, "at {at}");
        }
        assert_eq!(
            driver.passed(),
            [
                Passed::ThemePicker,
                Passed::SecurityNotes,
                Passed::TrustDialog
            ]
        );
    }

    #[test]
    fn driver_presses_enter_at_once_on_a_numbered_dialog_after_settling() {
        let mut driver = Driver::default();
        assert_eq!(driver.step(secs(0.0), TRUST_NUMBERED_PROCEED), Step::Wait);
        assert_eq!(
            driver.step(secs(0.5), TRUST_NUMBERED_PROCEED),
            Step::Press(Key::Enter)
        );
    }

    #[test]
    fn driver_resends_a_dropped_move_then_gives_up() {
        let mut driver = Driver::default();
        assert_eq!(driver.step(secs(0.0), TRUST_CURRENT_NO), Step::Wait);
        assert_eq!(
            driver.step(secs(0.5), TRUST_CURRENT_NO),
            Step::Press(Key::Down)
        );
        // Same screen soon after: the key may still be in flight.
        assert_eq!(driver.step(secs(0.75), TRUST_CURRENT_NO), Step::Wait);
        let mut at = 0.5;
        for _ in 1..MAX_SELECTION_MOVES {
            at += RESEND_AFTER.as_secs_f64();
            assert_eq!(
                driver.step(secs(at), TRUST_CURRENT_NO),
                Step::Press(Key::Down)
            );
        }
        at += RESEND_AFTER.as_secs_f64();
        assert_eq!(
            driver.step(secs(at), TRUST_CURRENT_NO),
            Step::Halt(Halt::CannotSelectYes)
        );
    }

    #[test]
    fn driver_halts_on_human_screens_without_a_key() {
        for screen in [API_KEY, LOGIN] {
            let mut driver = Driver::default();
            assert!(matches!(
                driver.step(secs(0.0), screen),
                Step::Halt(Halt::HumanNeeded(_))
            ));
        }
        let mut driver = Driver::default();
        assert_eq!(
            driver.step(secs(0.0), DECLINED_D1),
            Step::Halt(Halt::Exited(Screen::Declined))
        );
    }

    #[test]
    fn driver_needs_two_ready_captures() {
        let mut driver = Driver::default();
        let ready = ready_with_nbsp();
        assert_eq!(driver.step(secs(0.0), &ready), Step::Wait);
        assert_eq!(driver.step(secs(0.25), ""), Step::Wait);
        assert_eq!(driver.step(secs(0.5), &ready), Step::Wait);
        assert_eq!(driver.step(secs(0.75), &ready), Step::Ready);
    }

    proptest! {
        /// Whatever order and timing the dialog states arrive in, Enter is only ever pressed on
        /// a capture that shows "Yes" selected, and never before the dialog has settled.
        #[test]
        fn driver_never_enters_on_no(steps in prop::collection::vec((0u64..2000, 0usize..3), 1..60)) {
            let captures = [TRUST_CURRENT_NO, TRUST_CURRENT_YES, ""];
            let mut driver = Driver::default();
            let mut at = Duration::ZERO;
            let mut dialog_since: Option<Duration> = None;
            for (gap_ms, which) in steps {
                at += Duration::from_millis(gap_ms);
                let capture = captures[which];
                if capture.is_empty() {
                    dialog_since = None;
                } else if dialog_since.is_none() {
                    dialog_since = Some(at);
                }
                let step = driver.step(at, capture);
                if let Step::Press(key) = step {
                    let since = dialog_since.unwrap_or(at);
                    prop_assert!(at - since >= SETTLE);
                    if key == Key::Enter {
                        prop_assert_eq!(capture, TRUST_CURRENT_YES);
                    }
                }
            }
        }
    }
}
