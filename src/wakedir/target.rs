//! Where a session lives: the multiplexer pane a wake is typed into (validated in `panes`).

use std::fmt;

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
