//! What the integration tests share: the daemon in process and as the real binary
//! ([`harness`]), its private environment ([`env`]), one private tmux server type ([`tmux`]),
//! the stub agent-event-bus ([`stub_bus`]), recording stand-ins for multiplexer binaries
//! ([`stand_in`]), and the scripted agent TUIs the tests run in tmux panes (`fake_agent.py`,
//! `fake_claude.py`, next to this file).

pub mod env;
pub mod harness;
pub mod stand_in;
pub mod stub_bus;
pub mod tmux;

/// A scripted stand-in for the Claude Code TUI (prompt box, idle/busy titles, a permission
/// dialog), for the nudger's real-tmux tests.
pub const FAKE_AGENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/common/fake_agent.py");

/// A scripted stand-in for Claude Code's first-run screens, for the launcher's tests.
pub const FAKE_CLAUDE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/it/common/fake_claude.py"
);
