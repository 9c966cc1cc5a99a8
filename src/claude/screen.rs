//! Claude Code's input line as a plain screen capture shows it: which line is the prompt
//! (`❯ …`, or `> …` inside the older boxed input), and whether it holds typed text. Both the
//! idle nudger and the tmux guard ask, so that nothing is typed on top of a human's draft (the
//! reference bridge's lesson 20: the draft would be submitted with the wake text appended).

/// Placeholders Claude Code shows in an empty input line; a plain capture cannot tell their dim
/// text from typed text, so they are recognised by wording (lower case).
const PLACEHOLDERS: &[&str] = &["resend your message to try again", "try \""];

/// The text after the prompt glyph if `line` is a prompt line (`❯ …`, `> …`, boxed `│ > … │`).
/// A no-break space after the glyph counts as a space.
pub fn input(line: &str) -> Option<&str> {
    let t = line.trim_start().trim_start_matches('│').trim_start();
    let rest = t
        .strip_prefix('❯')
        .or_else(|| t.strip_prefix("> "))
        .or_else(|| (t.trim_end() == ">").then_some(""))?;
    Some(rest.trim_end().trim_end_matches('│'))
}

/// Whether the last prompt line of `screen` holds text that is neither empty nor a placeholder.
/// Without a recognisable prompt line the answer is no: this never invents a reason to wait.
pub fn holds_draft(screen: &str) -> bool {
    draft(screen).is_some()
}

/// The text on the last prompt line of `screen` (its first screen line, if it wraps), when it
/// is neither empty nor a placeholder.
pub fn draft(screen: &str) -> Option<String> {
    let text = screen.lines().rev().find_map(input)?.replace('\u{a0}', " ");
    is_draft(&text).then(|| text.trim().to_string())
}

fn is_draft(text: &str) -> bool {
    let text = text.trim();
    let lower = text.to_lowercase();
    !text.is_empty() && !PLACEHOLDERS.iter().any(|p| lower.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boxed(input: &str) -> String {
        format!("Done.\n\n────────────\n❯\u{a0}{input}\n────────────\n  ⏸ manual mode on\n")
    }

    #[test]
    fn typed_text_is_a_draft_in_either_prompt_style() {
        assert!(holds_draft(&boxed("second message")));
        assert!(holds_draft("Done.\n│ > half a thought      │\n"));
        assert!(holds_draft("> plain old prompt\n"));
    }

    #[test]
    fn empty_lines_placeholders_and_missing_prompts_are_not() {
        for empty in [
            "",
            "   ",
            "Resend your message to try again",
            "Try \"fix lint errors\"",
        ] {
            assert!(!holds_draft(&boxed(empty)), "{empty:?}");
        }
        assert!(!holds_draft("Done.\n│ >                    │\n"));
        assert!(!holds_draft("just output, no prompt here\n"));
    }

    #[test]
    fn only_the_last_prompt_line_counts() {
        // The transcript above echoes earlier prompts as `❯ hello`; the input box is last.
        let screen = "❯ hello\n\n● Hi!\n\n────────────\n❯ \n────────────\n";
        assert!(!holds_draft(screen));
    }
}
