//! Where a session lives: the multiplexer pane a wake is typed into. This is the value type
//! shared by the `panes.json` reader and writer (`wakedir::panes`) and the injectors (`mux`); the
//! validation rules for its strings live with the panes reader, not here.

use std::fmt;

/// A terminal pane in tmux or zellij.
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
    /// The multiplexer's name as it appears in `panes.json` and in `action` values.
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
