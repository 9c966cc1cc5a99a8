//! Which screen a freshly started Claude Code pane shows, for the launcher: first-run screens,
//! the folder-trust dialog in every known wording, screens only a human may answer, failed
//! starts and the idle prompt. What to press is `launch::driver`'s decision.

use super::{BUSY_FOOTER, CURSOR, input, is_rule, normalize};
use crate::reading::screen::Screen;

/// Lines the input may span between the prompt line and the rule under it (a wrapped draft).
const MAX_INPUT_LINES: usize = 8;
/// How far from the "Yes" option the selection marker may be and still belong to its menu.
const MENU_SPAN_LINES: usize = 3;

const THEME_PICKER: &str = "Choose the text style";
const SECURITY_NOTES: &str = "Press Enter to continue";
/// "Yes" options of the trust dialog: ≥2.1.69 wording, and the ≤2.0.x one.
const TRUST_YES: [&str; 2] = ["Yes, I trust this folder", "Yes, proceed"];
const API_KEY_PROMPT: &str = "Detected a custom API key";
const LOGIN_MARKERS: [&str; 3] = [
    "Select login method",
    "Paste code here",
    "Claude account with subscription",
];
/// Printed when the trust dialog was declined (Enter on "No, exit", or Esc); the process exits.
const DECLINED: &str = "start because this folder isn't trusted";
/// Printed by the connectivity preflight before it exits (run offline without an approved key).
const CONNECT_FAILED: &str = "Unable to connect to Anthropic services";

/// Name a capture of Claude Code's first screens. Exit messages win (the declined message is printed under the dialog it
/// answers), then screens that need a human, then the dialogs the launcher answers.
pub fn classify(screen: &str) -> Screen {
    let text = normalize(screen);
    let lines: Vec<&str> = text.lines().collect();
    let stops = [
        (&[DECLINED][..], Screen::Declined),
        (&[CONNECT_FAILED], Screen::ConnectFailed),
        (&[API_KEY_PROMPT], Screen::ApiKeyPrompt),
        (&LOGIN_MARKERS, Screen::Login),
    ];
    let shown = |markers: &[&str]| markers.iter().any(|marker| text.contains(marker));
    if let Some((_, stop)) = stops.into_iter().find(|(markers, _)| shown(markers)) {
        return stop;
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

fn trust_dialog(lines: &[&str]) -> Option<Screen> {
    let yes_line = lines
        .iter()
        .position(|line| TRUST_YES.iter().any(|yes| line.contains(yes)))?;
    let first = yes_line.saturating_sub(MENU_SPAN_LINES);
    let last = (yes_line + MENU_SPAN_LINES).min(lines.len().saturating_sub(1));
    let cursor_line = (first..=last)
        .filter(|&i| lines[i].trim_start().starts_with(CURSOR))
        .min_by_key(|&i| i.abs_diff(yes_line));
    Some(Screen::TrustDialog {
        yes_selected: cursor_line == Some(yes_line),
        yes_below_cursor: cursor_line.is_none_or(|cursor| cursor < yes_line),
    })
}

/// The idle input box: an unindented prompt line between two rules (2.1.x), or the older rounded
/// box's `│ >` line under its `╭` top.
fn has_idle_prompt(lines: &[&str]) -> bool {
    (1..lines.len()).any(|i| {
        let line = lines[i];
        let above = lines[i - 1];
        if line.starts_with(CURSOR) && input(line).is_some() {
            is_rule(above)
                && lines[i + 1..]
                    .iter()
                    .take(MAX_INPUT_LINES)
                    .any(|line| is_rule(line))
        } else {
            line.starts_with('\u{2502}')
                && input(line).is_some()
                && above.trim_start().starts_with('\u{256d}')
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claude::screen::fixtures::*;

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
                yes_below_cursor: true
            }
        );
        assert_eq!(
            classify(TRUST_CURRENT_YES),
            Screen::TrustDialog {
                yes_selected: true,
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
}
