//! Codex CLI's screen as a plain `tmux capture-pane -p` shows it (0.171.0, captured in tmux
//! against a stand-in of its model API: `tests/fixtures/screens/codex/`). This module owns what
//! a Codex screen says, read two ways, both pure: [`first_run`] for the launcher and [`read`]
//! for everyone after it.
//!
//! Its first screens: "Trust this folder?" (only in a git repository; `› 1. Trust and continue`
//! selected), "Hooks need review" (new or changed hooks; approving them is a person's decision,
//! or `wakebridge codex install --trust-hooks`'s for wakebridge's own), then its composer,
//! `› Ask Codex to do anything` over the model's line (`gpt-… default · /work`). The composer is
//! drawn for a moment before those screens, with only `? for shortcuts` under it: ready is the
//! composer with the model's line. Read into the launcher's [`Screen`]s.
//!
//! Its live screen, read into the same [`ScreenReading`] as Claude Code's: the transcript (each
//! prompt echoed as `› prompt`, the replies as `• …`), then the bottom pane: while a turn runs, a
//! status row (`• Working (5s • esc to interrupt)`, the dot blinking `•`/`◦`, a `└ Tip` under it
//! at times), queued messages, a usage notice, and the composer, which is drawn all along, over
//! the model's line and a line of hints. Codex draws no status row while it streams a reply: only
//! the moving transcript tells that turn from an idle one. A dialog or menu that takes keys (an
//! approval, the "Approaching rate limits" model switch, the model's question) is drawn *instead
//! of* the composer, with `›` on its selected `N.` option; a popup (slash commands, mentions)
//! above it.

use std::hash::{DefaultHasher, Hash, Hasher};

use crate::reading::screen::{Screen, ScreenReading};

const TRUST_FOLDER: &str = "Trust this folder?";
const TRUST_YES: &str = "1. Trust and continue";
const HOOKS_REVIEW: &str = "Hooks need review";
const COMPOSER: &str = "Ask Codex to do anything";
/// The status row's hint (`status_indicator_widget.rs`), and the footer of the model's question.
const TURN_RUNNING: &str = "esc to interrupt";
/// Between the model and the directory on the line under the composer.
const MODEL_LINE_SEPARATOR: &str = " \u{b7} ";
/// The selection marker of its menus, and its composer's prompt.
const CURSOR: char = '\u{203a}';
/// The composer's dim placeholders, drawn only while it is empty, which a capture shows as text.
/// 0.171.0's binary has the first two, side by side; Codex up to about 0.142 rotated the others
/// (`PLACEHOLDERS` in `codex-rs/tui/src/chatwidget.rs`).
const PLACEHOLDERS: &[&str] = &[
    COMPOSER,
    "Ask a follow-up question",
    "Explain this codebase",
    "Summarize recent commits",
    "Implement {feature}",
    "Find and fix a bug in @filename",
    "Write tests for @filename",
    "Improve documentation in @filename",
    "Run /review on my current changes",
    "Use /skills to list available skills",
];
/// What the composer shows instead of a long text it took as a paste: `[Pasted Content 2000 chars]`.
pub const PASTE_MARKER: &str = "[Pasted Content";
/// What Codex draws under its composer: the model's line and a line of hints (the early frame
/// has `? for shortcuts` alone). A `›` line with more under it is an echoed prompt.
const FOOTER_LINES: usize = 3;
/// Codex's line under a finished turn: `Worked for 4s • 6:21 AM`.
const TURN_DONE: &str = "Worked for ";
/// Codex's warnings and its usage notice start with it: `⚠ Heads up, …`.
const WARNING: char = '\u{26a0}';
/// The line under the status row (`  └ Tip: …`) and under a command's output.
const DETAIL: char = '\u{2514}';
/// Titles and footers only a dialog, menu or view that takes keys draws (`codex-rs/tui/src/…`,
/// each found in the 0.171.0 binary and in a capture): typing there would answer it.
const MODAL_PHRASES: &[&str] = &[
    // `chatwidget/rate_limits.rs`: the menu over the composer near a usage limit. Its first
    // option, selected, is "Switch to <cheaper model>": an Enter switches the model.
    "Approaching rate limits",
    // `bottom_pane/approval_overlay.rs`: what each approval asks, and the footer they share.
    "Would you like to run the following command?",
    "Would you like to make the following edits?",
    "Would you like to grant these permissions?",
    "Would you like to send input to",
    "Do you want to approve network access to",
    "Press enter to confirm or esc to cancel",
    // `onboarding/trust_directory.rs` and the hooks review at start.
    TRUST_FOLDER,
    HOOKS_REVIEW,
    // `bottom_pane/request_user_input/`: the model's question with options (Plan mode).
    "to submit answer",
    // `bottom_pane/chat_composer/history_search.rs`: Ctrl+R; Enter takes a past prompt.
    "reverse-i-search:",
    // Esc Esc at the composer: browsing the transcript, where Enter rewinds the conversation.
    "\u{21b5} rewind",
    // The `@` popup.
    "Type to search mentions",
    // The view `←` opens at an empty composer: `n` starts a session, Enter opens one.
    "Agent command center",
    // F2's warnings: `k` keeps one.
    "keep & next",
];

/// Its first screens, for the launcher.
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

/// Codex's live screen: what the session loop and the injector's guard decide by.
pub fn read(capture: &str) -> ScreenReading {
    let lines: Vec<&str> = capture.lines().map(str::trim_end).collect();
    let composer = composer_at(&lines);
    let above = &lines[..composer.unwrap_or(lines.len())];
    let output = output(above);
    let mut hasher = DefaultHasher::new();
    output.hash(&mut hasher);
    let modal = modal_in(capture, &lines, above);
    ScreenReading {
        hash: hasher.finish(),
        // Every dialog Codex draws takes keys; its questions for a person are among them.
        dialog: modal.is_some(),
        modal,
        turn_running: capture.contains(TURN_RUNNING),
        draft: composer.and_then(|at| draft(&lines[at..])),
        asked: asked(&output),
        // The usage limit it shows is not this reader's to tell.
        limit: None,
    }
}

/// Whether a capture shows the composer at all: a dialog is drawn in its place, and a frame
/// mid-redraw may show none.
pub fn composer_shown(capture: &str) -> bool {
    let lines: Vec<&str> = capture.lines().map(str::trim_end).collect();
    composer_at(&lines).is_some()
}

/// The composer's line: the last `›` line at the margin with the model's line under it, unless
/// it is a menu's option or an echoed prompt with the transcript under it (a dialog is drawn in
/// the composer's place).
fn composer_at(lines: &[&str]) -> Option<usize> {
    let at = lines.iter().rposition(|line| line.starts_with(CURSOR))?;
    let below = lines[at + 1..]
        .iter()
        .skip_while(|line| !line.trim().is_empty());
    let footer: Vec<&&str> = below.filter(|line| !line.trim().is_empty()).collect();
    // Its model's line right under it: what no dialog or overlay draws.
    let model_line = footer
        .first()
        .is_some_and(|l| l.contains(MODEL_LINE_SEPARATOR));
    let option = after_cursor(lines[at]).is_some_and(is_option);
    (footer.len() <= FOOTER_LINES && model_line && !option).then_some(at)
}

/// The transcript above the composer without the status row and its details (its timer and
/// tips move while nothing else does), nor the blank lines it leaves.
fn output<'a>(above: &[&'a str]) -> Vec<&'a str> {
    let mut status = false;
    let mut kept: Vec<&str> = (above.iter().copied())
        .filter(|line| {
            let detail = line.trim_start().starts_with(DETAIL);
            status = line.contains(TURN_RUNNING) || (status && detail);
            !status
        })
        .collect();
    while kept.last().is_some_and(|line| line.trim().is_empty()) {
        kept.pop();
    }
    kept
}

/// The composer's text, a person's draft: its `›` line and the lines under it up to a blank one.
/// None while it shows a placeholder (drawn only when it is empty).
fn draft(composer: &[&str]) -> Option<String> {
    let first = after_cursor(composer[0])?;
    if PLACEHOLDERS.contains(&first) {
        return None;
    }
    let rest = composer[1..]
        .iter()
        .take_while(|line| !line.trim().is_empty());
    // Its lines joined with a space: a text wrapped at the pane's edge reads back as typed (a
    // person's Ctrl+J lines are a draft all the same).
    let text = rest.fold(first.to_owned(), |text, line| text + " " + line.trim());
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// The agent's last line ends with `?`: Codex's own notes under it skipped; an echoed prompt
/// (`› …`) is the person's, not the agent's.
fn asked(output: &[&str]) -> bool {
    let note = |line: &&&str| {
        let line = line.trim_start();
        line.is_empty() || line.starts_with(TURN_DONE) || line.starts_with(WARNING)
    };
    output
        .iter()
        .rev()
        .find(|line| !note(line))
        .is_some_and(|line| {
            // Markdown around the question (`**…?**`, `` `…?` ``, `(…?)`) is still a question.
            let bare = line.trim_end_matches(['*', '_', '`', ')', '"', '\'']);
            !line.starts_with(CURSOR) && bare.ends_with('?')
        })
}

/// The dialog, menu or popup that takes keys, if any: what it showed.
fn modal_in(capture: &str, lines: &[&str], above: &[&str]) -> Option<&'static str> {
    let phrase = MODAL_PHRASES
        .iter()
        .find(|phrase| capture.contains(**phrase));
    let popup = slash_popup(above).then_some("slash-command popup");
    // Any other menu: the cursor on a numbered option, and another option.
    let options = lines
        .iter()
        .filter(|line| is_option(option_text(line)))
        .count();
    let cursor = lines
        .iter()
        .any(|line| after_cursor(line).is_some_and(is_option));
    let menu = (cursor && options >= 2).then_some("numbered options");
    phrase.copied().or(popup).or(menu)
}

/// The slash-command popup, drawn right above the composer: its selected row `› /name  …`.
fn slash_popup(above: &[&str]) -> bool {
    let block = (above.iter().rev())
        .skip_while(|line| line.trim().is_empty())
        .take_while(|line| !line.trim().is_empty());
    block
        .filter_map(|line| after_cursor(line))
        .any(|text| text.starts_with('/'))
}

/// The text after the cursor `›` on a line that starts with it.
fn after_cursor(line: &str) -> Option<&str> {
    Some(line.trim_start().strip_prefix(CURSOR)?.trim_start())
}

/// A menu line without its indentation and cursor: `› 1. Yes` → `1. Yes`.
fn option_text(line: &str) -> &str {
    line.trim_start().trim_start_matches(CURSOR).trim_start()
}

/// A menu's numbered option: `1. Yes, proceed (y)`, `12. GPT-…`.
fn is_option(text: &str) -> bool {
    let digits = text.len() - text.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    digits > 0 && text[digits..].starts_with(". ")
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

    /// A real capture (`tests/fixtures/screens/codex/`).
    macro_rules! fixture {
        ($name:literal) => {
            include_str!(concat!(
                "../../tests/fixtures/screens/codex/",
                $name,
                ".txt"
            ))
        };
    }

    /// What a reading says, without its hash.
    fn seen(
        turn_running: bool,
        modal: Option<&'static str>,
        draft: Option<&str>,
        asked: bool,
    ) -> (bool, Option<&'static str>, bool, Option<String>, bool) {
        let draft = draft.map(str::to_owned);
        (turn_running, modal, modal.is_some(), draft, asked)
    }

    fn reading(capture: &str) -> (bool, Option<&'static str>, bool, Option<String>, bool) {
        let r = read(capture);
        (r.turn_running, r.modal, r.dialog, r.draft, r.asked)
    }

    #[test]
    fn a_text_wrapped_at_the_pane_s_edge_reads_back_as_typed() {
        let wrapped = "\u{203a} Check the event bus - a directed event\n  arrived for this session.\n\n  stub-model default \u{b7} /w\n";
        assert!(composer_shown(wrapped));
        assert_eq!(
            read(wrapped).draft.as_deref(),
            Some(crate::mux::WAKE_PROMPT)
        );
    }

    #[test]
    fn its_composer_idle_busy_and_with_a_draft() {
        for (name, capture, expected) in [
            ("idle", fixture!("idle"), seen(false, None, None, false)),
            (
                "idle_with_draft",
                fixture!("idle_with_draft"),
                seen(false, None, Some("say hello"), false),
            ),
            (
                "idle_multiline_draft",
                fixture!("idle_multiline_draft"),
                seen(
                    false,
                    None,
                    Some("first line of a draft and its second line"),
                    false,
                ),
            ),
            (
                "idle_with_paste",
                fixture!("idle_with_paste"),
                seen(false, None, Some("[Pasted Content 2000 chars]"), false),
            ),
            ("asked", fixture!("asked"), seen(false, None, None, true)),
            ("busy", fixture!("busy"), seen(true, None, None, false)),
            (
                "busy_with_draft",
                fixture!("busy_with_draft"),
                seen(true, None, Some("half a thought"), false),
            ),
            (
                "busy_queued",
                fixture!("busy_queued"),
                seen(true, None, None, false),
            ),
            // Codex draws no status row while it streams: this running turn reads idle.
            (
                "streaming",
                fixture!("streaming"),
                seen(false, None, None, false),
            ),
            (
                "error_after_429",
                fixture!("error_after_429"),
                seen(false, None, None, false),
            ),
            // `?`'s shortcuts close at the next key, which reaches the composer.
            (
                "shortcuts",
                fixture!("shortcuts"),
                seen(false, None, None, false),
            ),
        ] {
            assert_eq!(reading(capture), expected, "{name}");
        }
    }

    #[test]
    fn its_dialogs_menus_and_popups_take_keys() {
        for (name, capture, expected) in [
            (
                "rate_limit_switch",
                fixture!("rate_limit_switch"),
                seen(false, Some("Approaching rate limits"), None, false),
            ),
            (
                "approval_exec",
                fixture!("approval_exec"),
                seen(
                    false,
                    Some("Would you like to run the following command?"),
                    None,
                    false,
                ),
            ),
            (
                "approval_patch",
                fixture!("approval_patch"),
                seen(
                    false,
                    Some("Would you like to make the following edits?"),
                    None,
                    false,
                ),
            ),
            (
                "request_user_input",
                fixture!("request_user_input"),
                seen(true, Some("to submit answer"), None, false),
            ),
            (
                "trust_folder",
                fixture!("trust_folder"),
                seen(false, Some(TRUST_FOLDER), None, false),
            ),
            (
                "hooks_review",
                fixture!("hooks_review"),
                seen(false, Some(HOOKS_REVIEW), None, false),
            ),
            (
                "slash_popup",
                fixture!("slash_popup"),
                seen(true, Some("slash-command popup"), Some("/"), false),
            ),
            (
                "mention_popup",
                fixture!("mention_popup"),
                seen(false, Some("Type to search mentions"), Some("@"), false),
            ),
            (
                "history_search",
                fixture!("history_search"),
                seen(false, Some("reverse-i-search:"), Some("limit429 go"), false),
            ),
            (
                "browsing_transcript",
                fixture!("browsing_transcript"),
                seen(false, Some("\u{21b5} rewind"), None, false),
            ),
            (
                "agents_center",
                fixture!("agents_center"),
                seen(false, Some("Agent command center"), None, false),
            ),
            (
                "warnings_view",
                fixture!("warnings_view"),
                seen(false, Some("keep & next"), None, false),
            ),
            (
                "model_picker",
                fixture!("model_picker"),
                seen(false, Some("numbered options"), None, false),
            ),
        ] {
            assert_eq!(reading(capture), expected, "{name}");
        }
    }

    #[test]
    fn an_unknown_menu_with_the_cursor_on_an_option_takes_keys() {
        // The rate-limit menu without its title: still a menu.
        let untitled = fixture!("rate_limit_switch").replace("Approaching rate limits", "");
        assert_eq!(read(&untitled).modal, Some("numbered options"));
        // Numbered output with no cursor on it is no menu.
        let list = fixture!("asked").replace("Shall I go on?", "1. Parsed\n  2. Checked");
        assert_eq!(read(&list).modal, None);
        assert!(is_option("12. GPT") && !is_option(". no number") && !is_option("1.5 s"));
    }

    #[test]
    fn only_the_last_prompt_line_at_the_bottom_is_the_composer() {
        // The transcript echoes prompts as `› prompt`; under a dialog, the last one is no draft.
        assert!(fixture!("approval_exec").contains("\u{203a} runcmd now"));
        assert_eq!(read(fixture!("approval_exec")).draft, None);
        // The placeholder is no draft, the same words with more are.
        let typed = fixture!("idle").replace(COMPOSER, "Ask Codex to do anything, then stop");
        assert_eq!(
            read(&typed).draft.as_deref(),
            Some("Ask Codex to do anything, then stop")
        );
    }

    #[test]
    fn the_composer_is_shown_unless_a_dialog_took_its_place() {
        for shown in [
            fixture!("idle"),
            fixture!("busy_with_draft"),
            fixture!("slash_popup"),
            fixture!("history_search"),
        ] {
            assert!(composer_shown(shown));
        }
        for dialog in [fixture!("approval_exec"), fixture!("rate_limit_switch")] {
            assert!(!composer_shown(dialog));
        }
        assert!(
            read(fixture!("idle_with_paste"))
                .draft
                .unwrap()
                .starts_with(PASTE_MARKER)
        );
    }

    #[test]
    fn a_question_is_the_agents_last_line_not_a_persons_prompt() {
        let bold = fixture!("asked").replace("Shall I go on?", "**Shall I go on?**");
        assert!(read(&bold).asked);
        // Mid-turn, the last line above the status row is the person's own prompt.
        let prompt = fixture!("busy").replace("slow40 please", "slow40 please, ok?");
        assert_ne!(prompt, fixture!("busy"));
        assert!(!read(&prompt).asked);
    }

    #[test]
    fn the_hash_moves_with_the_output_not_with_the_timer() {
        let hash = |capture: &str| read(capture).hash;
        let (busy, later) = (fixture!("busy"), fixture!("busy_later"));
        assert_ne!(busy, later, "the timer and the dot moved");
        assert_eq!(hash(busy), hash(later));
        let tip = later.replace(
            "esc to interrupt)\n",
            "esc to interrupt)\n  \u{2514} Tip: Press ^t to open the full transcript.\n",
        );
        assert_ne!(tip, later);
        assert_eq!(hash(&tip), hash(later));
        assert_ne!(
            hash(fixture!("streaming")),
            hash(fixture!("streaming_later"))
        );
        // A draft is no output; an answer is.
        assert_eq!(hash(fixture!("idle")), hash(fixture!("idle_with_draft")));
        let answered = fixture!("asked").replace("Shall I go on?", "Done.");
        assert_ne!(hash(fixture!("asked")), hash(&answered));
        assert!(!read(&answered).asked);
    }
}
