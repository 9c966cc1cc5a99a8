//! Where a session lives: the multiplexer pane a wake is typed into (validated in `panes`), and
//! which pane this process runs in, from the multiplexer's environment: tmux's `TMUX_PANE`
//! first, then zellij's pair. Outside any, `None`: writers then write no entry at all (an empty
//! one would warn and ask an operator to repair a working setup).

use std::fmt;

use crate::env::Env;
use crate::wakedir::printable::is_valid_string;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PaneTarget {
    /// A tmux pane id such as `%3`; `session` is informational (tmux pane ids are global).
    Tmux {
        pane: String,
        session: Option<String>,
    },
    /// A zellij pane id (`0`, `terminal_0`) inside a named session (names may contain `:`).
    Zellij { pane: String, session: String },
}

impl PaneTarget {
    pub fn mux_name(&self) -> &'static str {
        match self {
            PaneTarget::Tmux { .. } => "tmux",
            PaneTarget::Zellij { .. } => "zellij",
        }
    }

    pub fn pane(&self) -> &str {
        match self {
            PaneTarget::Tmux { pane, .. } | PaneTarget::Zellij { pane, .. } => pane,
        }
    }
}

impl fmt::Display for PaneTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PaneTarget::Tmux { pane, .. } => write!(f, "tmux pane {pane}"),
            PaneTarget::Zellij { pane, session } => {
                write!(f, "zellij pane {pane} in session {session}")
            }
        }
    }
}

/// The pane named by `env`; empty or non-printable values, and half a zellij pair, give `None`.
pub fn detect_target(env: &Env) -> Option<PaneTarget> {
    let valid = |name: &str| env.get(name).filter(|value| is_valid_string(value));
    if let Some(pane) = valid("TMUX_PANE") {
        return Some(PaneTarget::Tmux {
            pane,
            session: None,
        });
    }
    match (valid("ZELLIJ_PANE_ID"), valid("ZELLIJ_SESSION_NAME")) {
        (Some(pane), Some(session)) => Some(PaneTarget::Zellij { pane, session }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detect(pairs: &[(&str, &str)]) -> Option<PaneTarget> {
        detect_target(&Env::from_pairs(pairs.iter().copied()))
    }

    #[test]
    fn tmux_pane_wins() {
        assert_eq!(
            detect(&[
                ("TMUX_PANE", "%4"),
                ("ZELLIJ_PANE_ID", "0"),
                ("ZELLIJ_SESSION_NAME", "s")
            ]),
            Some(PaneTarget::Tmux {
                pane: "%4".into(),
                session: None
            })
        );
    }

    #[test]
    fn zellij_needs_both_variables() {
        assert_eq!(
            detect(&[
                ("ZELLIJ_PANE_ID", "0"),
                ("ZELLIJ_SESSION_NAME", "tenacious-lemur")
            ]),
            Some(PaneTarget::Zellij {
                pane: "0".into(),
                session: "tenacious-lemur".into()
            })
        );
        assert_eq!(detect(&[("ZELLIJ_PANE_ID", "0")]), None);
        assert_eq!(detect(&[("ZELLIJ_SESSION_NAME", "s")]), None);
    }

    #[test]
    fn empty_or_unprintable_values_are_no_target() {
        assert_eq!(detect(&[]), None);
        assert_eq!(detect(&[("TMUX_PANE", ""), ("ZELLIJ_PANE_ID", "")]), None);
        assert_eq!(detect(&[("TMUX_PANE", "%1\n")]), None);
        assert_eq!(
            detect(&[
                ("TMUX_PANE", ""),
                ("ZELLIJ_PANE_ID", "0"),
                ("ZELLIJ_SESSION_NAME", "s")
            ]),
            Some(PaneTarget::Zellij {
                pane: "0".into(),
                session: "s".into()
            })
        );
    }
}
