//! What a freshly started Claude Code pane is showing, and what the launcher should do about it.
//! [`classify`] reads one plain-text capture of the pane (no escape sequences) and names the
//! screen: the first-run theme picker and security notes, the folder-trust dialog in every known
//! wording, the screens only a human may answer (API key approval, login), the ways a start
//! fails, and the idle prompt. [`Driver`] turns a sequence of captures into keystrokes (Enter,
//! Down, Up and nothing else) with the anti-typeahead pauses and the "press Enter on the trust
//! dialog only when Yes is visibly selected" rule. Both are pure: capturing the pane, sending
//! the keys and keeping time belong to the caller (`launch`).
//!
//! The phrases matched here are facts about Claude Code's UI (2.0.x to 2.1.332), not guesses at
//! its intent; a wording this module does not know reads as [`Screen::Unknown`], on which the
//! driver only waits.

use std::time::Duration;

use crate::mux::Key;

/// The selection marker Claude Code draws in front of the focused menu option and at the start
/// of its input line.
pub const CURSOR: char = '\u{276f}';
/// The no-break space Claude Code draws after [`CURSOR`] on its input line (2.1.332).
pub const NBSP: char = '\u{a0}';
/// The horizontal rule above and below Claude Code's input box.
const RULE_CHAR: char = '\u{2500}';
/// Shortest run of [`RULE_CHAR`] taken as the input box's rule: the box spans the pane, so even
/// a narrow pane draws far more than this, while a stray box-drawing glyph in text does not.
const MIN_RULE_CHARS: usize = 10;
/// Lines the input may span between the prompt line and the rule under it (a wrapped draft).
const MAX_INPUT_LINES: usize = 8;
/// How far (in lines) from the "Yes" option the selection marker may be and still belong to the
/// same menu: the trust menu has two options on adjacent lines.
const MENU_SPAN_LINES: usize = 3;

/// Wait this long after a screen first appears before pressing anything on it. Claude Code
/// 2.1.332 ignores keys that arrive within 150 ms of a menu's first render (anti-typeahead
/// guard); 500 ms clears it with room for a slow redraw, as the reference recipe advises.
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

const THEME_PICKER: &str = "Choose the text style";
const SECURITY_NOTES: &str = "Press Enter to continue";
/// "Yes" options of the trust dialog: ≥2.1.69 wording (numbered until about 2.1.2xx, unnumbered
/// and second since), and the ≤2.0.x wording.
const TRUST_YES: [&str; 2] = ["Yes, I trust this folder", "Yes, proceed"];
const API_KEY_PROMPT: &str = "Detected a custom API key";
const LOGIN_MARKERS: [&str; 3] = [
    "Select login method",
    "Paste code here",
    "Claude account with subscription",
];
/// Footer shown while a turn runs (2.1.332): the prompt box is drawn then too, but it is busy.
const BUSY_FOOTER: &str = "esc to interrupt";
/// Printed when the trust dialog was declined (Enter on "No, exit", or Esc); the process exits.
const DECLINED: &str = "start because this folder isn't trusted";
/// Printed by the connectivity preflight before it exits (run offline without an approved key).
const CONNECT_FAILED: &str = "Unable to connect to Anthropic services";

/// What the pane shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screen {
    /// Nothing but whitespace: starting up (it can stay blank for tens of seconds offline).
    Blank,
    /// First-run "Choose the text style" menu; Enter keeps the default.
    ThemePicker,
    /// First-run security notes; Enter continues.
    SecurityNotes,
    /// The folder-trust dialog. `yes_selected`: the selection marker is on the "Yes" line.
    /// `numbered`: the older `1. Yes ...` wording. `yes_below_cursor`: "Yes" is under the
    /// marker (press Down), else above it (press Up); true when no marker is visible.
    TrustDialog {
        yes_selected: bool,
        numbered: bool,
        yes_below_cursor: bool,
    },
    /// "Detected a custom API key": approving a key is a human's decision.
    ApiKeyPrompt,
    /// A login method menu or OAuth code prompt: needs a human.
    Login,
    /// The idle input prompt inside its box, with no dialog on screen.
    Ready,
    /// The trust dialog was declined and Claude Code exited.
    Declined,
    /// The connectivity preflight failed and Claude Code exited.
    ConnectFailed,
    /// Anything else: a screen this module does not know, or Claude Code at work.
    Unknown,
}

/// The first-run screens the launcher answers, as reported in `screens_passed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Passed {
    ThemePicker,
    SecurityNotes,
    TrustDialog,
}

impl Passed {
    /// Stable snake_case name for output.
    pub fn name(self) -> &'static str {
        match self {
            Passed::ThemePicker => "theme_picker",
            Passed::SecurityNotes => "security_notes",
            Passed::TrustDialog => "trust_dialog",
        }
    }
}

/// Name a capture. Exit messages win over everything (the declined message is printed under the
/// dialog it answers), then screens that need a human, then the dialogs the launcher answers,
/// then the prompt.
pub fn classify(screen: &str) -> Screen {
    let text = normalize(screen);
    let lines: Vec<&str> = text.lines().collect();
    if text.contains(DECLINED) {
        return Screen::Declined;
    }
    if text.contains(CONNECT_FAILED) {
        return Screen::ConnectFailed;
    }
    if text.contains(API_KEY_PROMPT) {
        return Screen::ApiKeyPrompt;
    }
    if LOGIN_MARKERS.iter().any(|marker| text.contains(marker)) {
        return Screen::Login;
    }
    if let Some(dialog) = trust_dialog(&lines) {
        return dialog;
    }
    if text.contains(THEME_PICKER) {
        return Screen::ThemePicker;
    }
    if text.contains(SECURITY_NOTES) {
        return Screen::SecurityNotes;
    }
    if has_idle_prompt(&lines) && !text.contains(BUSY_FOOTER) {
        return Screen::Ready;
    }
    if text.trim().is_empty() {
        return Screen::Blank;
    }
    Screen::Unknown
}

/// NBSP becomes a space and the typographic apostrophe a plain one, so phrases match however
/// the UI spaced or quoted them. The prompt check looks at NBSP before this runs.
fn normalize(screen: &str) -> String {
    screen
        .chars()
        .map(|c| match c {
            NBSP => ' ',
            '\u{2019}' => '\'',
            other => other,
        })
        .collect()
}

fn trust_dialog(lines: &[&str]) -> Option<Screen> {
    let yes_line = lines
        .iter()
        .position(|line| TRUST_YES.iter().any(|yes| line.contains(yes)))?;
    let numbered = option_label(lines[yes_line])
        .split_once('.')
        .is_some_and(|(number, _)| {
            !number.is_empty() && number.chars().all(|c| c.is_ascii_digit())
        });
    let first = yes_line.saturating_sub(MENU_SPAN_LINES);
    let last = (yes_line + MENU_SPAN_LINES).min(lines.len().saturating_sub(1));
    let cursor_line = (first..=last)
        .filter(|&i| lines[i].trim_start().starts_with(CURSOR))
        .min_by_key(|&i| i.abs_diff(yes_line));
    Some(Screen::TrustDialog {
        yes_selected: cursor_line == Some(yes_line),
        numbered,
        yes_below_cursor: cursor_line.is_none_or(|cursor| cursor < yes_line),
    })
}

/// A menu line without its indentation and selection marker: `❯ 1. Yes` → `1. Yes`.
fn option_label(line: &str) -> &str {
    line.trim_start().trim_start_matches(CURSOR).trim_start()
}

/// The input prompt: a line starting with `❯` followed by NBSP, a space or nothing, with the
/// box's rule right above it and another rule a few lines below (2.1.x); or the older rounded
/// box `│ > ` under a `╭` line.
fn has_idle_prompt(lines: &[&str]) -> bool {
    let boxed = (1..lines.len()).any(|i| {
        is_prompt_line(lines[i])
            && is_rule(lines[i - 1])
            && lines[i + 1..]
                .iter()
                .take(MAX_INPUT_LINES)
                .any(|line| is_rule(line))
    });
    boxed
        || (1..lines.len()).any(|i| {
            let line = lines[i].trim_start();
            line.strip_prefix("\u{2502} >")
                .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', NBSP]))
                && lines[i - 1].trim_start().starts_with('\u{256d}')
        })
}

fn is_prompt_line(line: &str) -> bool {
    line.strip_prefix(CURSOR)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', NBSP]))
}

fn is_rule(line: &str) -> bool {
    let line = line.trim();
    line.chars().count() >= MIN_RULE_CHARS && line.chars().all(|c| c == RULE_CHAR)
}

/// Why the driver gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Halt {
    /// A screen only a human may answer is up (API key approval, login).
    HumanNeeded(Screen),
    /// Claude Code printed an exit message (declined trust, connectivity failure).
    Exited(Screen),
    /// The trust dialog's selection would not move to "Yes".
    CannotSelectYes,
}

/// What to do after a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing yet; capture again later.
    Wait,
    /// Press this key, then capture again.
    Press(Key),
    /// The idle prompt is up: the agent is ready for input.
    Ready,
    /// Stop without pressing anything more.
    Halt(Halt),
}

/// Which screen is up, coarsely, so that moving the trust selection does not restart its settle
/// time while a change of screen does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Theme,
    Security,
    Trust,
    Other,
}

fn phase_of(screen: Screen) -> Phase {
    match screen {
        Screen::ThemePicker => Phase::Theme,
        Screen::SecurityNotes => Phase::Security,
        Screen::TrustDialog { .. } => Phase::Trust,
        _ => Phase::Other,
    }
}

#[derive(Debug, Clone)]
struct LastPress {
    at: Duration,
    capture: String,
}

/// Decides, capture by capture, which key to press. Feed it every capture with the time since
/// the launch started; it never presses Escape, digits or text, never presses Enter on a trust
/// dialog whose visible selection is not "Yes", and never presses anything on a screen younger
/// than [`SETTLE`].
#[derive(Debug, Clone, Default)]
pub struct Driver {
    phase: Option<(Phase, Duration)>,
    last_press: Option<LastPress>,
    moves: u32,
    ready_streak: u32,
    passed: Vec<Passed>,
}

impl Driver {
    pub fn new() -> Self {
        Self::default()
    }

    /// The first-run screens answered so far, in order.
    pub fn passed(&self) -> &[Passed] {
        &self.passed
    }

    /// Classify `capture`, taken `at` after the launch started, and decide the next step.
    pub fn step(&mut self, at: Duration, capture: &str) -> Step {
        let screen = classify(capture);
        let phase = phase_of(screen);
        match self.phase {
            Some((current, _)) if current == phase => {}
            _ => {
                self.phase = Some((phase, at));
                if phase != Phase::Trust {
                    self.moves = 0;
                }
            }
        }
        if screen == Screen::Ready {
            self.ready_streak += 1;
        } else {
            self.ready_streak = 0;
        }
        match screen {
            Screen::ApiKeyPrompt | Screen::Login => Step::Halt(Halt::HumanNeeded(screen)),
            Screen::Declined | Screen::ConnectFailed => Step::Halt(Halt::Exited(screen)),
            Screen::Ready if self.ready_streak >= READY_CONFIRMATIONS => Step::Ready,
            Screen::Ready | Screen::Blank | Screen::Unknown => Step::Wait,
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
        let in_flight = self.last_press.as_ref().is_some_and(|last| {
            last.capture == capture && at.saturating_sub(last.at) < RESEND_AFTER
        });
        settled && !in_flight
    }

    fn press(&mut self, at: Duration, capture: &str, key: Key) -> Step {
        self.last_press = Some(LastPress {
            at,
            capture: capture.to_owned(),
        });
        Step::Press(key)
    }

    fn enter(&mut self, at: Duration, capture: &str, screen: Passed) -> Step {
        if !self.may_press(at, capture) {
            return Step::Wait;
        }
        if self.passed.last() != Some(&screen) {
            self.passed.push(screen);
        }
        self.press(at, capture, Key::Enter)
    }

    fn move_to_yes(&mut self, at: Duration, capture: &str, yes_below_cursor: bool) -> Step {
        if !self.may_press(at, capture) {
            return Step::Wait;
        }
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
    use proptest::prelude::*;

    /// Run A: offline preflight failure (the last line is the wrapper shell's).
    const CONNECT_FAILED_A: &str = r#"Welcome to Claude Code v2.1.332
..........................................................

     *                                       █████▓▓░
                                 *         ███▓░     ░░
            ░░░░░░                        ███▓░
    ░░░   ░░░░░░░░░░                      ███▓░
   ░░░░░░░░░░░░░░░░░░░    *                ██▓░░      ▓
                                             ░▓▓███▓▓░
 *                                 ░░░░
                                 ░░░░░░░░
                               ░░░░░░░░░░░░░░░░
       █████████                                        *
      ██▄█████▄██                        *
       █████████      *
.......█ █   █ █..........................................

 Unable to connect to Anthropic services

 Failed to connect to api.anthropic.com: ENOTFOUND

 Check your internet connection and network settings.

 Claude Code might not be available in your country. Check supported countries at
 https://anthropic.com/supported-countries
EXITED rc=1
"#;

    /// B1: first-run theme picker.
    const THEME_B1: &str = r#"Welcome to Claude Code v2.1.332
..........................................................

     *                                       █████▓▓░
                                 *         ███▓░     ░░
            ░░░░░░                        ███▓░
    ░░░   ░░░░░░░░░░                      ███▓░
   ░░░░░░░░░░░░░░░░░░░    *                ██▓░░      ▓
                                             ░▓▓███▓▓░
 *                                 ░░░░
                                 ░░░░░░░░
                               ░░░░░░░░░░░░░░░░
       █████████                                        *
      ██▄█████▄██                        *
       █████████      *
.......█ █   █ █..........................................

 Let's get started.

 Choose the text style that looks best with your terminal
 To change this later, run /theme

 ❯ ✔ Auto (match terminal)
     Dark mode
     Light mode
     Dark mode (colorblind-friendly)
     Light mode (colorblind-friendly)
     Dark mode (ANSI colors only)
     Light mode (ANSI colors only)

 ╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌
  1  function greet() {
  2 -  console.log("Hello, World!");
  2 +  console.log("Hello, Claude!");
  3  }
 ╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌
  Syntax theme: Monokai Extended (ctrl+t to disable)
"#;

    /// B2: security notes.
    const SECURITY_B2: &str = r#"Welcome to Claude Code v2.1.332
..........................................................

     *                                       █████▓▓░
                                 *         ███▓░     ░░
            ░░░░░░                        ███▓░
    ░░░   ░░░░░░░░░░                      ███▓░
   ░░░░░░░░░░░░░░░░░░░    *                ██▓░░      ▓
                                             ░▓▓███▓▓░
 *                                 ░░░░
                                 ░░░░░░░░
                               ░░░░░░░░░░░░░░░░
       █████████                                        *
      ██▄█████▄██                        *
       █████████      *
.......█ █   █ █..........................................

 Security notes:

 1. Claude can make mistakes.
    You're responsible for Claude's actions and should always
    review them, especially when running code.

 2. Due to prompt injection risks, only use it with code you trust
    Learn more: https://code.claude.com/docs/en/security

 Press Enter to continue
"#;

    /// B3: current trust wording, selection on "No, exit".
    const TRUST_CURRENT_NO: &str = r#"────────────────────────────────────────────────────────────────────────────────────────────────────────────────────────
 Accessing workspace:

 /home/dev/projB

 Quick safety check: Is this a project you created or one you trust? (Like your own code, a well-known open source
 project, or work from your team). If not, take a moment to review what's in this folder first.

 Claude Code'll be able to read, edit, and execute files here.

 Security guide

 ❯ No, exit
   Yes, I trust this folder

 Enter to confirm · Esc to cancel
"#;

    /// B3 after Down: selection on "Yes, I trust this folder".
    const TRUST_CURRENT_YES: &str = r#"────────────────────────────────────────────────────────────────────────────────────────────────────────────────────────
 Accessing workspace:

 /home/dev/projB

 Quick safety check: Is this a project you created or one you trust? (Like your own code, a well-known open source
 project, or work from your team). If not, take a moment to review what's in this folder first.

 Claude Code'll be able to read, edit, and execute files here.

 Security guide

   No, exit
 ❯ Yes, I trust this folder

 Enter to confirm · Esc to cancel
"#;

    /// B4: the idle prompt as printed in the notes (the NBSP after the marker was trimmed).
    const READY_B4: &str = r#" ▐▛███▛█   Claude Code v2.1.332
▝▜██████▀  Opus 5.5 · API Usage Billing
 ▝▝   ▝▝   /home/dev/projB

⚠ Remote managed settings failed to load (network error) · no remote policy applied · /status for details

▎ Auto mode is now Claude Code's default permission mode.
▎ Auto mode lets Claude handle permission prompts automatically. Claude checks each tool call for risky actions and
▎ prompt injection before executing, runs the ones it assesses as lower-risk, and blocks the rest.
▎ https://code.claude.com/docs/en/permission-modes

────────────────────────────────────────────────────────────────────────────────────────────────────────────────────────
❯
────────────────────────────────────────────────────────────────────────────────────────────────────────────────────────
  ⏸ manual mode on · ? for shortcuts · ← for agents                                                 ◐ medium · /effort
"#;

    /// B5: "hello" typed into the prompt (NBSP after the marker).
    const TYPED_B5: &str = r#" ▐▛███▛█   Claude Code v2.1.332
▝▜██████▀  Opus 5.5 · API Usage Billing
 ▝▝   ▝▝   /home/dev/projB

⚠ Remote managed settings failed to load (network error) · no remote policy applied · /status for details

▎ Auto mode is now Claude Code's default permission mode.
▎ Auto mode lets Claude handle permission prompts automatically. Claude checks each tool call for risky actions and
▎ prompt injection before executing, runs the ones it assesses as lower-risk, and blocks the rest.
▎ https://code.claude.com/docs/en/permission-modes

────────────────────────────────────────────────────────────────────────────────────────────────────────────────────────
❯ hello
────────────────────────────────────────────────────────────────────────────────────────────────────────────────────────
  ⏸ manual mode on                                                                                  ◐ medium · /effort
"#;

    /// B5 after Enter: retrying, busy.
    const BUSY_B5: &str = r#" ▐▛███▛█   Claude Code v2.1.332
▝▜██████▀  Opus 5.5 · API Usage Billing
 ▝▝   ▝▝   /home/dev/projB

⚠ Remote managed settings failed to load (network error) · no remote policy applied · /status for details

▎ Auto mode is now Claude Code's default permission mode.
▎ Auto mode lets Claude handle permission prompts automatically. Claude checks each tool call for risky actions and
▎ prompt injection before executing, runs the ones it assesses as lower-risk, and blocks the rest.
▎ https://code.claude.com/docs/en/permission-modes

❯ hello

✻ Can't reach the API server — check your internet or DNS (ENOTFOUND) · retrying in 2s · attempt 2/10

────────────────────────────────────────────────────────────────────────────────────────────────────────────────────────
❯
────────────────────────────────────────────────────────────────────────────────────────────────────────────────────────
  ⏸ manual mode on · esc to interrupt
                             Switched to Manual because your organization's settings didn't load · Shift+Tab to switch
"#;

    /// D1: trust declined, Claude Code exited.
    const DECLINED_D1: &str = r#"────────────────────────────────────────────────────────────────────────────────────────────────────────────────────────
 Accessing workspace:

 /home/dev/projD1

 Quick safety check: Is this a project you created or one you trust? (Like your own code, a well-known open source
 project, or work from your team). If not, take a moment to review what's in this folder first.

 Claude Code'll be able to read, edit, and execute files here.

 Security guide

 ❯ No, exit
   Yes, I trust this folder

 Enter to confirm · Esc to cancel

Claude Code didn't start because this folder isn't trusted.
Run claude again and choose Yes, or run it in another folder.
EXITED rc=1
"#;

    /// About 2.1.69 to 2.1.2xx: today's text, numbered, "Yes" first and focused
    /// (anthropics/claude-code#40002, #34589, #31037).
    const TRUST_NUMBERED_TRUST: &str = "\
────────────────────────────────────────────────────────────────────────────────
 Accessing workspace:

 /home/dev/projB

 Quick safety check: Is this a project you created or one you trust? (Like your own code, a
 well-known open source project, or work from your team). If not, take a moment to review
 what's in this folder first.

 Claude Code'll be able to read, edit, and execute files here.

 Security guide

 ❯ 1. Yes, I trust this folder
   2. No, exit

 Enter to confirm · Esc to cancel
";

    /// ≤2.0.x wording (anthropics/claude-code#9256, #6397).
    const TRUST_NUMBERED_PROCEED: &str = "\
 Do you trust the files in this folder?

 /home/dev/projB

 Claude Code may read, write, or execute files contained in this directory. This can pose
 security risks, so only use files from trusted sources.

 ❯ 1. Yes, proceed
   2. No, exit

 Enter to confirm · Esc to exit
";

    /// The API-key confirmation, assembled from the 2.1.332 strings the notes quote.
    const API_KEY: &str = "\
 Detected a custom API key in your environment

 ANTHROPIC_API_KEY: sk-ant-...abcdefghijklmnopqrst

 Do you want to use this API key?

   Yes
 ❯ No (recommended)
";

    const LOGIN: &str = "\
 Claude Code can be used with your Claude subscription or billed based on API usage through
 your Console account.

 Select login method:

 ❯ 1. Claude account with subscription · Pro, Max, Team, or Enterprise
   2. Anthropic Console account · API usage billing
";

    fn ready_with_nbsp() -> String {
        READY_B4.replace("\n❯\n", "\n❯\u{a0}\n")
    }

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn first_run_screens_are_recognised() {
        assert_eq!(classify(THEME_B1), Screen::ThemePicker);
        assert_eq!(classify(SECURITY_B2), Screen::SecurityNotes);
    }

    #[test]
    fn current_trust_wording_starts_on_no_and_wants_down() {
        assert_eq!(
            classify(TRUST_CURRENT_NO),
            Screen::TrustDialog {
                yes_selected: false,
                numbered: false,
                yes_below_cursor: true
            }
        );
        assert_eq!(
            classify(TRUST_CURRENT_YES),
            Screen::TrustDialog {
                yes_selected: true,
                numbered: false,
                yes_below_cursor: false
            }
        );
    }

    #[test]
    fn numbered_wordings_start_on_yes() {
        for screen in [TRUST_NUMBERED_TRUST, TRUST_NUMBERED_PROCEED] {
            assert_eq!(
                classify(screen),
                Screen::TrustDialog {
                    yes_selected: true,
                    numbered: true,
                    yes_below_cursor: false
                },
                "{screen}"
            );
        }
    }

    #[test]
    fn selection_below_yes_wants_up() {
        let moved = TRUST_NUMBERED_PROCEED
            .replace(" ❯ 1. Yes", "   1. Yes")
            .replace("   2. No", " ❯ 2. No");
        assert_eq!(
            classify(&moved),
            Screen::TrustDialog {
                yes_selected: false,
                numbered: true,
                yes_below_cursor: false
            }
        );
    }

    #[test]
    fn exit_messages_win_over_the_dialog_they_follow() {
        assert_eq!(classify(DECLINED_D1), Screen::Declined);
        assert_eq!(classify(CONNECT_FAILED_A), Screen::ConnectFailed);
        let curly = DECLINED_D1.replace("isn't", "isn\u{2019}t");
        assert_eq!(classify(&curly), Screen::Declined);
    }

    #[test]
    fn api_key_and_login_screens_need_a_human() {
        assert_eq!(classify(API_KEY), Screen::ApiKeyPrompt);
        assert_eq!(classify(LOGIN), Screen::Login);
    }

    #[test]
    fn idle_prompt_is_ready_with_nbsp_space_or_nothing_after_the_marker() {
        assert_eq!(classify(&ready_with_nbsp()), Screen::Ready);
        assert_eq!(classify(READY_B4), Screen::Ready);
        assert_eq!(classify(TYPED_B5), Screen::Ready);
        let legacy = "╭──────────────────────────────╮\n│ >\u{a0}                           │\n╰──────────────────────────────╯\n";
        assert_eq!(classify(legacy), Screen::Ready);
    }

    #[test]
    fn busy_or_unboxed_prompts_are_not_ready() {
        assert_eq!(classify(BUSY_B5), Screen::Unknown);
        assert_eq!(classify("❯\u{a0}\n"), Screen::Unknown);
        let no_rule_below = ready_with_nbsp().replace(
            "\n────────────────────────────────────────────────────────────────────────────────────────────────────────────────────────\n  ⏸",
            "\n  ⏸",
        );
        assert_eq!(classify(&no_rule_below), Screen::Unknown);
        // A menu's indented marker is not the input line.
        assert_ne!(classify(THEME_B1), Screen::Ready);
    }

    #[test]
    fn blank_and_unknown() {
        assert_eq!(classify(""), Screen::Blank);
        assert_eq!(classify("\n   \n\u{a0}\n"), Screen::Blank);
        assert_eq!(classify("Loading…"), Screen::Unknown);
    }

    #[test]
    fn driver_passes_the_current_first_run_sequence() {
        let mut driver = Driver::new();
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
        let mut driver = Driver::new();
        assert_eq!(driver.step(secs(0.0), TRUST_NUMBERED_PROCEED), Step::Wait);
        assert_eq!(
            driver.step(secs(0.5), TRUST_NUMBERED_PROCEED),
            Step::Press(Key::Enter)
        );
    }

    #[test]
    fn driver_resends_a_dropped_move_then_gives_up() {
        let mut driver = Driver::new();
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
            let mut driver = Driver::new();
            assert!(matches!(
                driver.step(secs(0.0), screen),
                Step::Halt(Halt::HumanNeeded(_))
            ));
        }
        let mut driver = Driver::new();
        assert_eq!(
            driver.step(secs(0.0), DECLINED_D1),
            Step::Halt(Halt::Exited(Screen::Declined))
        );
    }

    #[test]
    fn driver_needs_two_ready_captures() {
        let mut driver = Driver::new();
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
            let mut driver = Driver::new();
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
