//! Claude Code's screen as a plain capture shows it, read the same way for every caller: the
//! input line and its draft, the busy footer and spinner, dialogs and menus, the pane title.
//! The glyphs and phrases are facts about Claude Code's UI (2.0.x to 2.1.332).

pub(crate) mod first_run;
#[cfg(test)]
#[path = "../../../tests/fixtures/screens/fixtures.rs"]
pub mod fixtures;

use std::hash::{DefaultHasher, Hash, Hasher};

use crate::reading::screen::{ScreenReading, Title};

/// The marker in front of the focused menu option and at the start of the input line.
pub const CURSOR: char = '\u{276f}';
/// The no-break space Claude Code draws after [`CURSOR`] on its input line (2.1.332).
pub const NBSP: char = '\u{a0}';
/// The footer that shows only while a turn runs (the input box is drawn then too).
pub const BUSY_FOOTER: &str = "esc to interrupt";
/// Claude Code's pane title while idle starts with this glyph (`✳ Claude Code`).
pub const IDLE_TITLE_GLYPH: char = '\u{2733}';
/// Title glyphs Claude Code alternates while busy; braille spinners (U+2801..U+28FF) count too.
const BUSY_TITLE_GLYPHS: &[char] = &['\u{25d0}', '\u{25d1}', '\u{25d2}', '\u{25d3}'];
/// First characters of the in-screen spinner line (`✻ Tinkering…`).
const SPINNER_GLYPHS: &[char] = &[
    '✱', '✲', '✳', '✴', '✵', '✶', '✷', '✸', '✹', '✺', '✻', '✼', '✽', '✾', '✿', '❀', '❁', '❂', '❃',
    '❇', '❈', '❉', '❊', '❋', '✢', '✣', '✤', '✥', '✦', '✧', '✨', '·', '•', '●', '○',
];
/// Lower-cased phrases only a dialog that takes keys shows.
const MODAL_PHRASES: &[&str] = &[
    "esc to cancel",
    "0: dismiss",
    "yes, i trust this folder",
    "yes, proceed",
    // An inbox message held for a human (a session in bypass mode): Deny is selected, so an
    // Enter would drop it.
    "held message from another session",
];
/// Lower-cased phrases of a question waiting for a human: the nudger does not nudge over them,
/// but a wake may be typed there, so [`modal`] leaves them out.
const QUESTION_PHRASES: &[&str] = &["do you want to", "would you like to", "how is claude doing"];
/// What Claude Code shows in the input line instead of a long text it took for a paste.
pub const PASTE_MARKER: &str = "[Pasted text";
/// Characters the input box's horizontal rules are drawn with.
const RULE_CHARS: &[char] = &['─', '━', '═'];
/// Shortest run of [`RULE_CHARS`] taken as a rule (the box spans the pane).
const MIN_RULE_CHARS: usize = 8;
/// How far above the prompt line the box's top rule may be.
const RULE_SEARCH_LINES: usize = 3;
/// Placeholders of an empty input line: a capture cannot tell their dim text from typed text.
const PLACEHOLDERS: &[&str] = &["resend your message to try again", "try \""];

/// What Claude Code's pane title says.
pub fn title_state(title: &str) -> Title {
    match title.trim_start().chars().next() {
        Some(IDLE_TITLE_GLYPH) => Title::Idle,
        Some(c) if BUSY_TITLE_GLYPHS.contains(&c) || ('\u{2801}'..='\u{28ff}').contains(&c) => {
            Title::Busy
        }
        _ => Title::Unknown,
    }
}

/// Claude Code's screen as `text` (a plain capture) shows it.
pub fn read(text: &str) -> ScreenReading {
    let normalized = normalize(text);
    let lines: Vec<&str> = normalized.lines().map(str::trim_end).collect();
    let lower = normalized.to_lowercase();
    let modal = modal_in(&lower, &lines);
    let dialog = QUESTION_PHRASES.iter().any(|phrase| lower.contains(phrase)) || modal.is_some();
    let mut kept: Vec<&&str> = lines[..input_box_start(&lines)]
        .iter()
        .filter(|line| !is_spinner_line(line) && !line.to_lowercase().contains(BUSY_FOOTER))
        .collect();
    while kept.last().is_some_and(|line| line.trim().is_empty()) {
        kept.pop();
    }
    let mut hasher = DefaultHasher::new();
    kept.hash(&mut hasher);
    ScreenReading {
        hash: hasher.finish(),
        dialog,
        modal,
        turn_running: turn_running_in(&lines),
        draft: draft(&normalized),
        asked: kept.last().is_some_and(|line| {
            // Markdown around the question (`**…?**`, `` `…?` ``, `(…?)`) is still a question.
            let bare = line.trim_end_matches(['*', '_', '`', ')', '"', '\'']);
            bare.ends_with('?')
        }),
        // The limit it shows is `claude::limits`' to read; Claude Code's side joins the two.
        limit: None,
    }
}

/// A turn running: the busy footer under the input box, or a spinner line (`✻ Working…`) right
/// above it; a reply further up may well start with `●` and hold an `…`.
fn turn_running_in(lines: &[&str]) -> bool {
    let start = input_box_start(lines);
    let footer = lines[start..]
        .iter()
        .any(|line| line.to_lowercase().contains(BUSY_FOOTER));
    let above = &lines[start.saturating_sub(RULE_SEARCH_LINES)..start];
    // `●` opens a reply here, not a spinner.
    footer
        || above
            .iter()
            .any(|line| is_spinner_line(line) && !line.trim_start().starts_with('●'))
}

/// NBSP becomes a space and the typographic apostrophe a plain one, so phrases match.
pub fn normalize(screen: &str) -> String {
    screen
        .chars()
        .map(|c| match c {
            NBSP => ' ',
            '\u{2019}' => '\'',
            other => other,
        })
        .collect()
}

/// The text after the prompt glyph if `line` is a prompt line (`❯ …`, `> …`, boxed `│ > … │`).
pub fn input(line: &str) -> Option<&str> {
    let t = line.trim_start().trim_start_matches('│').trim_start();
    let rest = t
        .strip_prefix(CURSOR)
        .or_else(|| t.strip_prefix("> "))
        .or_else(|| t.strip_prefix(">\u{a0}"))
        .or_else(|| (t.trim_end() == ">").then_some(""))?;
    Some(rest.trim_end().trim_end_matches('│'))
}

/// The text on the last prompt line of `screen`, when it is neither empty nor a placeholder.
pub fn draft(screen: &str) -> Option<String> {
    let text = screen.lines().rev().find_map(input)?.replace(NBSP, " ");
    let text = text.trim();
    let lower = text.to_lowercase();
    (!text.is_empty() && !PLACEHOLDERS.iter().any(|p| lower.starts_with(p)))
        .then(|| text.to_owned())
}

/// The menu or dialog that holds the screen, if any: typing there would answer it.
fn modal_in(lower: &str, lines: &[&str]) -> Option<&'static str> {
    MODAL_PHRASES
        .iter()
        .copied()
        .find(|phrase| lower.contains(phrase))
        .or_else(|| has_option_list(lines).then_some("numbered options"))
}

pub fn is_rule(line: &str) -> bool {
    let line = line.trim();
    line.chars().count() >= MIN_RULE_CHARS && line.chars().all(|c| RULE_CHARS.contains(&c))
}

/// Index where the input box (and the footer under it) begins: the rule above the last prompt
/// line, else that line; without a prompt line, the last rule; else the end.
pub(crate) fn input_box_start(lines: &[&str]) -> usize {
    match lines.iter().rposition(|line| input(line).is_some()) {
        Some(at) => {
            let from = at.saturating_sub(RULE_SEARCH_LINES);
            (from..at).rev().find(|&i| is_rule(lines[i])).unwrap_or(at)
        }
        None => lines
            .iter()
            .rposition(|l| is_rule(l))
            .unwrap_or(lines.len()),
    }
}

/// A menu line without its indentation and selection marker: `❯ 1. Yes` → `1. Yes`.
pub fn option_label(line: &str) -> &str {
    line.trim_start().trim_start_matches(CURSOR).trim_start()
}

/// A selection cursor on a numbered option, and another option (agent output has no cursor).
fn has_option_list(lines: &[&str]) -> bool {
    cursor_on_option(lines) && lines.iter().filter(|l| is_option(option_label(l))).count() >= 2
}

/// A selection cursor on a numbered option (`❯ 1. Yes`).
pub(crate) fn cursor_on_option(lines: &[&str]) -> bool {
    lines.iter().any(|line| {
        line.trim_start()
            .strip_prefix(CURSOR)
            .is_some_and(|rest| is_option(rest.trim_start()))
    })
}

/// `1. text` / `2) text`.
fn is_option(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_digit())
        && matches!(chars.next(), Some('.' | ')'))
        && matches!(chars.next(), Some(' '))
}

fn is_spinner_line(line: &str) -> bool {
    let trimmed = line.trim_start();
    let mut chars = trimmed.chars();
    matches!(chars.next(), Some(c) if SPINNER_GLYPHS.contains(&c))
        && chars.next() == Some(' ')
        && trimmed.contains('\u{2026}')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boxed(input: &str) -> String {
        format!("Done.\n\n────────────\n❯\u{a0}{input}\n────────────\n  ⏸ manual mode on\n")
    }

    #[test]
    fn typed_text_is_a_draft_in_either_prompt_style() {
        assert!(draft(&boxed("second message")).is_some());
        assert!(draft("Done.\n│ > half a thought      │\n").is_some());
        assert!(draft("> plain old prompt\n").is_some());
    }

    #[test]
    fn empty_lines_placeholders_and_missing_prompts_are_not() {
        for empty in [
            "",
            "   ",
            "Resend your message to try again",
            "Try \"fix lint errors\"",
        ] {
            assert!(draft(&boxed(empty)).is_none(), "{empty:?}");
        }
        assert!(draft("Done.\n│ >                    │\n").is_none());
        assert!(draft("just output, no prompt here\n").is_none());
    }

    #[test]
    fn only_the_last_prompt_line_counts() {
        // The transcript above echoes earlier prompts as `❯ hello`; the input box is last.
        let screen = "❯ hello\n\n● Hi!\n\n────────────\n❯ \n────────────\n";
        assert!(draft(screen).is_none());
    }

    #[test]
    fn a_running_turn_shows_under_or_right_above_the_input_box_only() {
        let box_ = "────────────\n❯ \n────────────\n";
        // 2.1.332 mid-turn, as captured: the spinner above, the footer below.
        let running =
            format!("❯ hello\n\n✢ Inferring…\n\n{box_}  ⏸ manual mode on · esc to interrupt\n");
        assert!(read(&running).turn_running);
        assert!(read(&format!("✻ Working…\n\n{box_}")).turn_running);
        // A finished reply with an ellipsis, further up, is no running turn.
        let done = format!(
            "● Let me check the logs… done.\n\nAll tests pass.\n\nMore text.\n\n{box_}  ? for shortcuts\n"
        );
        assert!(!read(&done).turn_running);
        assert!(!read(&format!("● Let me know…\n\n{box_}")).turn_running);
    }

    #[test]
    fn titles_are_idle_busy_or_unknown() {
        assert_eq!(title_state("\u{2733} Claude Code"), Title::Idle);
        assert_eq!(title_state("\u{25d0} Claude Code"), Title::Busy);
        assert_eq!(title_state("\u{25d1} Claude Code"), Title::Busy);
        assert_eq!(title_state("\u{280b} agent"), Title::Busy);
        assert_eq!(
            title_state("Gi=31,s=1,v=1,a=q,t=d,f=24;AAAA"),
            Title::Unknown
        );
        assert_eq!(title_state("bash"), Title::Unknown);
        assert_eq!(title_state(""), Title::Unknown);
    }

    #[test]
    fn screen_hash_ignores_prompt_box_footer_and_spinner() {
        let a =
            "Done: added the endpoint.\n\n────────────\n❯\u{a0}\n────────────\n  ? for shortcuts\n";
        let b = "Done: added the endpoint.\n\n────────────\n❯ half typed\n────────────\n  ⏸ plan mode\n";
        let c = "Done: added the endpoint.\n✻ Pondering… (esc to interrupt)\n\n────────────\n❯ \n────────────\n";
        let d = "Done: added the OTHER endpoint.\n\n────────────\n❯ \n────────────\n";
        assert_eq!(read(a).hash, read(b).hash);
        assert_eq!(read(a).hash, read(c).hash);
        assert_ne!(read(a).hash, read(d).hash);
        assert!(read(c).turn_running);
        assert!(!read(a).turn_running);
        assert!(!read(a).dialog);
    }

    #[test]
    fn dialogs_are_recognised_but_plain_numbered_output_is_not() {
        for screen in [
            "Bash command\n  rm -rf build\nDo you want to proceed?\n❯ 1. Yes\n  2. No\n",
            "● How is Claude doing this session? (optional)\n  1: Bad    2: Fine   3: Good   0: Dismiss\n",
            "Pick one\n❯ 1. Alpha\n  2. Beta\n",
            "Quick safety check\n❯ No, exit\n  Yes, I trust this folder\n",
        ] {
            assert!(read(screen).dialog, "{screen}");
        }
        let summary = "Changes:\n1. Added a route\n2. Added a test\n\n──────────\n❯ \n──────────\n";
        assert!(!read(summary).dialog);
    }

    #[test]
    fn menus_hold_the_screen_but_an_agents_question_does_not() {
        for screen in [
            "Bash command\n  rm -rf build\nDo you want to proceed?\n❯ 1. Yes\n  2. No\n",
            "● How is Claude doing this session? (optional)\n  1: Bad    2: Fine   3: Good   0: Dismiss\n",
            "Quick safety check\n❯ No, exit\n  Yes, I trust this folder\n",
            "Edit file\n  Esc to cancel · Tab to amend\n",
        ] {
            assert!(read(screen).modal.is_some(), "{screen}");
        }
        assert!(read(super::fixtures::HELD_PEER_MESSAGE).modal.is_some());
        let question = "● Do you want to keep the old API? Would you like to see a diff?\n\n──────────\n❯ \n──────────\n";
        assert_eq!(read(question).modal, None);
        assert_eq!(read(&boxed("")).modal, None);
    }

    #[test]
    fn a_question_as_the_agents_last_line_is_asked_in_any_markdown() {
        let screen =
            |last: &str| format!("● Done the parser.\n{last}\n\n──────────\n❯ \n──────────\n");
        for asked in [
            "Shall I go on?",
            "**Shall I go on?**",
            "Which one (a or b?)",
            "Use `x?`",
        ] {
            assert!(read(&screen(asked)).asked, "{asked}");
        }
        for not in ["All done.", "Fixed the `?` operator.", "Is it? Yes, done."] {
            assert!(!read(&screen(not)).asked, "{not}");
        }
    }
}
