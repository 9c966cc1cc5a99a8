//! Python's `str.isprintable()`, the test every pane id and session name must pass before it
//! becomes a multiplexer argument: a control-byte test would let NBSP, zero-width and
//! bidi-override characters through.

use unicode_general_category::{GeneralCategory, get_general_category};

/// Printable unless Cc, Cf, Cs, Co, Cn, Zl, Zp or Zs (the ASCII space excepted).
pub fn is_printable_char(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    !matches!(
        get_general_category(c),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::Surrogate
            | GeneralCategory::PrivateUse
            | GeneralCategory::Unassigned
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
            | GeneralCategory::SpaceSeparator
    )
}

/// `s.isprintable()` (the empty string is printable, as in Python).
pub fn is_printable(s: &str) -> bool {
    s.chars().all(is_printable_char)
}

/// The reference's "valid string": non-empty and printable.
pub fn is_valid_string(s: &str) -> bool {
    !s.is_empty() && is_printable(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_pane_ids_session_names_and_non_ascii_letters() {
        for s in [
            "%3",
            "0",
            "terminal_0",
            "tenacious-lemur",
            "has:colon",
            "süß",
            "カ",
            "🦳",
            "a b",
            "~!@#$%^&*()",
        ] {
            assert!(is_valid_string(s), "{s:?} should be valid");
        }
    }

    #[test]
    fn rejects_each_non_printable_category() {
        let samples = [
            ('\0', "Cc NUL"),
            ('\n', "Cc newline"),
            ('\t', "Cc tab"),
            ('\u{1b}', "Cc escape"),
            ('\u{7f}', "Cc delete"),
            ('\u{85}', "Cc next line"),
            ('\u{200b}', "Cf zero width space"),
            ('\u{202e}', "Cf right-to-left override"),
            ('\u{feff}', "Cf byte order mark"),
            ('\u{e000}', "Co private use"),
            ('\u{10fffd}', "Co supplementary private use"),
            ('\u{378}', "Cn unassigned"),
            ('\u{ffff}', "Cn noncharacter"),
            ('\u{2028}', "Zl"),
            ('\u{2029}', "Zp"),
            ('\u{a0}', "Zs no-break space"),
            ('\u{3000}', "Zs ideographic space"),
            ('\u{2003}', "Zs em space"),
        ];
        for (c, what) in samples {
            assert!(
                !is_printable_char(c),
                "{what} ({c:?}) must not be printable"
            );
            assert!(
                !is_valid_string(&format!("%3{c}")),
                "{what} inside a pane id"
            );
        }
    }

    #[test]
    fn empty_string_is_printable_but_not_valid() {
        assert!(is_printable(""));
        assert!(!is_valid_string(""));
    }

    proptest! {
        #[test]
        fn printable_ascii_graphic_and_space_always_valid(s in "[ -~]{1,64}") {
            prop_assert!(is_valid_string(&s));
        }

        #[test]
        fn any_ascii_control_makes_a_string_invalid(
            prefix in "[ -~]{0,16}",
            control in prop_oneof![0u8..0x20, Just(0x7fu8)],
            suffix in "[ -~]{0,16}",
        ) {
            let s = format!("{prefix}{}{suffix}", char::from(control));
            prop_assert!(!is_printable(&s));
        }

        #[test]
        fn printability_is_per_character(a in any::<String>(), b in any::<String>()) {
            let joined = format!("{a}{b}");
            prop_assert_eq!(is_printable(&joined), is_printable(&a) && is_printable(&b));
        }

        #[test]
        fn matches_the_category_definition(c in any::<char>()) {
            let category = get_general_category(c).abbreviation();
            let rejected = ["Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"].contains(&category);
            prop_assert_eq!(is_printable_char(c), c == ' ' || !rejected);
        }
    }
}
