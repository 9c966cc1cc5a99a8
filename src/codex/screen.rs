//! Codex CLI's first screens as the launcher meets them (0.171.0, captured in tmux): "Trust this
//! folder?" (only in a git repository; `› 1. Trust and continue` selected), "Hooks need review"
//! (new or changed hooks; approving them is a person's decision, or `wakebridge codex install
//! --trust-hooks`'s for wakebridge's own), then its composer, `› Ask Codex to do anything` over
//! the model's line (`gpt-… default · /work`), which also shows under a running turn (`• Working
//! (4s • esc to interrupt)`). The composer is drawn for a moment before those screens, with only
//! `? for shortcuts` under it: ready is the composer with the model's line. Read into the
//! launcher's [`Screen`]s; pure.

use crate::reading::screen::Screen;

const TRUST_FOLDER: &str = "Trust this folder?";
const TRUST_YES: &str = "1. Trust and continue";
const HOOKS_REVIEW: &str = "Hooks need review";
const COMPOSER: &str = "Ask Codex to do anything";
const TURN_RUNNING: &str = "esc to interrupt";
/// Between the model and the directory on the line under the composer.
const MODEL_LINE_SEPARATOR: &str = " \u{b7} ";
/// The selection marker of its menus, and its composer's prompt.
const CURSOR: char = '\u{203a}';

pub fn first_run(capture: &str) -> Screen {
    if capture.contains(HOOKS_REVIEW) {
        return Screen::HooksReview;
    }
    if capture.contains(TRUST_FOLDER) {
        let lines: Vec<&str> = capture.lines().collect();
        let yes = lines.iter().position(|line| line.contains(TRUST_YES));
        let cursor = (lines.iter()).position(|line| line.trim_start().starts_with(CURSOR));
        return Screen::TrustDialog {
            yes_selected: yes.is_some() && yes == cursor,
            yes_below_cursor: cursor.zip(yes).is_none_or(|(cursor, yes)| cursor < yes),
        };
    }
    let lines: Vec<&str> = capture.lines().collect();
    let composer = lines.iter().position(|line| line.contains(COMPOSER));
    let below = composer.and_then(|at| lines[at + 1..].iter().find(|l| !l.trim().is_empty()));
    let model_line = below.is_some_and(|line| line.contains(MODEL_LINE_SEPARATOR));
    if model_line || capture.contains(TURN_RUNNING) {
        return Screen::Ready;
    }
    match capture.trim().is_empty() {
        true => Screen::Blank,
        false => Screen::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRUST: &str = "  Folder access\n  /tmp/cx6/work\n  Trust this folder? Codex can read, edit, and run files here, subject to your permission settings.\n\u{203a} 1. Trust and continue\n  2. Back to Agent Command Center\n  enter continue \u{b7} esc back\n";
    const HOOKS: &str = "  Hooks need review\n  4 hooks are new or changed.\n  Hooks can run outside the sandbox after you trust them.\n\u{203a} 1. Review hooks\n  2. Trust all and continue\n  3. Continue without trusting (hooks won't run)\n  enter confirm \u{b7} esc skip\n";
    const READY: &str = "  >_ OpenAI Codex (v0.171.0)\n     /tmp/cx6/work\n\n\u{203a} Ask Codex to do anything\n\n  stub-model default \u{b7} /tmp/cx6/work\n  \u{2190} for agents \u{b7} ? for shortcuts\n";

    #[test]
    fn its_first_screens_as_the_launcher_reads_them() {
        assert_eq!(
            first_run(TRUST),
            Screen::TrustDialog {
                yes_selected: true,
                yes_below_cursor: false
            }
        );
        let moved = TRUST
            .replace("\u{203a} 1.", "  1.")
            .replace("  2. Back", "\u{203a} 2. Back");
        assert_eq!(
            first_run(&moved),
            Screen::TrustDialog {
                yes_selected: false,
                yes_below_cursor: false
            }
        );
        assert_eq!(first_run(HOOKS), Screen::HooksReview);
        assert_eq!(first_run(READY), Screen::Ready);
        let early = "  >_ OpenAI Codex (v0.171.0)\n     loading\n\n\u{203a} Ask Codex to do anything\n  ? for shortcuts\n";
        assert_eq!(
            first_run(early),
            Screen::Unknown,
            "drawn before its dialogs"
        );
        let busy = "\u{2022} Working (4s \u{2022} esc to interrupt)\n\u{203a} \n";
        assert_eq!(first_run(busy), Screen::Ready);
        assert_eq!(first_run("\n \n"), Screen::Blank);
        assert_eq!(first_run("Loading..."), Screen::Unknown);
    }
}
