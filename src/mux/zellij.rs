//! zellij as a backend: the guard, typing (`write-chars -p`, then `write -p <pane> 13`) and the
//! screen (`dump-screen -p`). zellij's actions exit 0 against a pane that does not exist
//! (0.45.1), so the guard is all that stands between a stale mapping and the wrong pane.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Deserialize;

use super::process::{self, Finished, Invocation, MuxError};
use super::text::KeystrokeText;
use super::{Mux, MuxConfig, PaneState, StaleReason};
use crate::deadline::Deadline;

const NO_SESSIONS_MARKER: &str = "No active zellij sessions found";

const EXITED_MARKER: &str = "(EXITED";

const CREATED_MARKER: &str = " [Created ";

/// stderr fragments with which clap (zellij's parser) rejects a subcommand or flag this version
/// does not have: `list-panes` and `--json` arrived in 0.44.0.
const UNSUPPORTED_MARKERS: &[&str] = &[
    "unrecognized subcommand",
    "unexpected argument",
    "wasn't expected",
    "invalid subcommand",
    "Found argument",
];

/// zellij 0.45.1's stderr (exit 1) for an action when no session runs at all.
const NO_SERVER_MARKER: &str = "There is no active session";

/// How many times a read-only call is asked before its "not there" or empty answer is believed:
/// zellij 0.45.1 under load sometimes loses a server's reply, in bursts.
const LISTING_ATTEMPTS: usize = 3;

/// Long enough for a busy server to catch up, short against the inject budget.
const LISTING_PAUSE: Duration = Duration::from_millis(20);

const CARRIAGE_RETURN: &str = "13";

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ZellijPane {
    pub session: String,
    /// `N`, `terminal_N` or `plugin_N`.
    pub pane: String,
}

#[derive(Debug)]
pub struct Zellij {
    bin: PathBuf,
    warned_no_list_panes: AtomicBool,
    no_dump_screen: AtomicBool,
}

impl Zellij {
    pub fn new(config: &MuxConfig) -> Self {
        Self {
            bin: config.zellij_bin.clone(),
            warned_no_list_panes: AtomicBool::new(false),
            no_dump_screen: AtomicBool::new(false),
        }
    }

    fn action(&self, label: &'static str, session: &str, action: &str) -> Invocation {
        Invocation::new(&self.bin, label).args(["--session", session, "action", action])
    }

    fn pane_action(&self, label: &'static str, target: &ZellijPane, action: &str) -> Invocation {
        self.action(label, &target.session, action)
            .args(["-p", &target.pane])
    }

    async fn session_state(
        &self,
        session: &str,
        deadline: Deadline,
    ) -> Result<PaneState, MuxError> {
        let inv = Invocation::new(&self.bin, "zellij list-sessions").args(["list-sessions", "-n"]);
        let answer = ask_until_believed(&inv, deadline, |answer| match answer {
            Ok(done) => matches!(
                classify_session(&done.stdout, session),
                PaneState::Stale(StaleReason::SessionMissing { .. })
            ),
            Err(MuxError::Exit { stderr, .. }) => stderr.contains(NO_SESSIONS_MARKER),
            Err(_) => false,
        })
        .await;
        match answer {
            Ok(done) => Ok(classify_session(&done.stdout, session)),
            Err(MuxError::Exit { ref stderr, .. }) if stderr.contains(NO_SESSIONS_MARKER) => {
                Ok(classify_session("", session))
            }
            Err(err) => Err(err),
        }
    }

    /// Only asked once `list-sessions` has listed the session as running, so an empty answer or
    /// a "session not there" contradicts it and is asked again before it is believed.
    async fn pane_state(
        &self,
        target: &ZellijPane,
        deadline: Deadline,
    ) -> Result<PaneState, MuxError> {
        let inv = self
            .action("zellij action list-panes", &target.session, "list-panes")
            .arg("--json");
        let answer = ask_until_believed(&inv, deadline, |answer| match answer {
            Ok(done) => done.stdout.trim().is_empty(),
            Err(MuxError::Exit { stderr, .. }) => session_gone(stderr, &target.session),
            Err(_) => false,
        })
        .await;
        match answer {
            Ok(done) => classify_pane(&done.stdout, &target.pane),
            // The session ended between the listing and this call.
            Err(MuxError::Exit { ref stderr, .. }) if session_gone(stderr, &target.session) => {
                Ok(PaneState::Stale(StaleReason::SessionMissing {
                    session: target.session.clone(),
                }))
            }
            Err(MuxError::Exit { ref stderr, .. }) if unsupported(stderr) => {
                if !self.warned_no_list_panes.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        zellij_stderr = %stderr,
                        "zellij has no `action list-panes` (needs 0.44+): the stale-pane guard \
                         checks only that the session runs, not the pane"
                    );
                }
                Ok(PaneState::Live)
            }
            Err(err) => Err(err),
        }
    }
}

/// Asks up to [`LISTING_ATTEMPTS`] times while `doubtful` says the answer may be a lost reply.
async fn ask_until_believed(
    inv: &Invocation,
    deadline: Deadline,
    doubtful: impl Fn(&Result<Finished, MuxError>) -> bool,
) -> Result<Finished, MuxError> {
    let mut answer = process::run(inv, deadline).await;
    for _ in 1..LISTING_ATTEMPTS {
        if !doubtful(&answer) || deadline.remaining() <= LISTING_PAUSE {
            break;
        }
        tokio::time::sleep(LISTING_PAUSE).await;
        answer = process::run(inv, deadline).await;
    }
    answer
}

impl Mux for Zellij {
    type Pane = ZellijPane;

    const NAME: &'static str = "zellij";

    async fn check_pane(
        &self,
        target: &ZellijPane,
        deadline: Deadline,
    ) -> Result<PaneState, MuxError> {
        match self.session_state(&target.session, deadline).await? {
            PaneState::Live => self.pane_state(target, deadline).await,
            stale => Ok(stale),
        }
    }

    async fn screen(
        &self,
        target: &ZellijPane,
        deadline: Deadline,
    ) -> Result<Option<String>, MuxError> {
        if self.no_dump_screen.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let inv = self.pane_action("zellij action dump-screen", target, "dump-screen");
        // A live pane's dump holds at least its rows' line ends: an empty one is a lost reply.
        let answer = ask_until_believed(&inv, deadline, |answer| match answer {
            Ok(done) => done.stdout.is_empty(),
            Err(MuxError::Exit { stderr, .. }) => session_gone(stderr, &target.session),
            Err(_) => false,
        })
        .await;
        match answer {
            Ok(done) => Ok(Some(done.stdout)),
            Err(MuxError::Exit { ref stderr, .. }) if unsupported(stderr) => {
                if !self.no_dump_screen.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        zellij_stderr = %stderr,
                        "zellij cannot dump a pane's screen (`action dump-screen -p` needs 0.44+): \
                         wakes wait the whole submit delay and are not confirmed, and drafts and \
                         menus are not seen"
                    );
                }
                Ok(None)
            }
            Err(err) => Err(err),
        }
    }

    async fn type_text(
        &self,
        target: &ZellijPane,
        text: &KeystrokeText,
        deadline: Deadline,
    ) -> Result<(), MuxError> {
        let inv = self
            .pane_action("zellij action write-chars", target, "write-chars")
            .arg(text.as_str());
        process::run(&inv, deadline).await.map(drop)
    }

    async fn submit(&self, target: &ZellijPane, deadline: Deadline) -> Result<(), MuxError> {
        let inv = self
            .pane_action("zellij action write", target, "write")
            .arg(CARRIAGE_RETURN);
        process::run(&inv, deadline).await.map(drop)
    }
}

/// Find `session` in `list-sessions -n` output (`-s` lists exited sessions like running ones).
fn classify_session(listing: &str, session: &str) -> PaneState {
    let listed = listing.lines().find_map(|line| {
        let (name, rest) = match line.find(CREATED_MARKER) {
            Some(at) => (&line[..at], &line[at..]),
            None => (line.trim_end(), ""),
        };
        (name == session).then_some(rest)
    });
    let session = session.to_owned();
    match listed {
        Some(rest) if rest.contains(EXITED_MARKER) => {
            PaneState::Stale(StaleReason::SessionExited { session })
        }
        Some(_) => PaneState::Live,
        None => PaneState::Stale(StaleReason::SessionMissing { session }),
    }
}

fn unsupported(stderr: &str) -> bool {
    UNSUPPORTED_MARKERS.iter().any(|m| stderr.contains(m))
}

/// Does an action's stderr (zellij 0.45.1) say that the session is not there?
fn session_gone(stderr: &str, session: &str) -> bool {
    stderr.contains(NO_SERVER_MARKER) || stderr.contains(&format!("Session '{session}' not found"))
}

#[derive(Debug, Deserialize)]
struct ListedPane {
    id: u64,
    #[serde(default)]
    is_plugin: bool,
    #[serde(default)]
    exited: bool,
}

fn classify_pane(json: &str, pane: &str) -> Result<PaneState, MuxError> {
    let Some((want_plugin, want_id)) = parse_pane_id(pane) else {
        return Ok(PaneState::Stale(StaleReason::Unreadable {
            detail: format!("{pane:?} is not a zellij pane id (N, terminal_N or plugin_N)"),
        }));
    };
    let listed: Vec<ListedPane> = serde_json::from_str(json).map_err(|e| MuxError::Output {
        label: "zellij action list-panes",
        detail: format!("not the expected JSON pane list: {e}"),
    })?;
    match listed
        .iter()
        .find(|p| p.id == want_id && p.is_plugin == want_plugin)
    {
        None => Ok(PaneState::Stale(StaleReason::PaneMissing)),
        Some(p) if p.exited => Ok(PaneState::Stale(StaleReason::PaneDead)),
        Some(_) => Ok(PaneState::Live),
    }
}

fn parse_pane_id(pane: &str) -> Option<(bool, u64)> {
    let (plugin, digits) = match (pane.strip_prefix("terminal_"), pane.strip_prefix("plugin_")) {
        (Some(rest), _) => (false, rest),
        (_, Some(rest)) => (true, rest),
        _ => (false, pane),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().map(|id| (plugin, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_listed_and_running_is_live() {
        let listing = "has:colon [Created 5m 3s ago] \nother [Created 1h ago] (current)\n";
        assert_eq!(classify_session(listing, "has:colon"), PaneState::Live);
        assert_eq!(classify_session(listing, "other"), PaneState::Live);
    }

    #[test]
    fn session_missing_or_exited_is_stale() {
        let listing = "gone [Created 2h ago] (EXITED - attach to resurrect)\n";
        assert!(matches!(
            classify_session(listing, "gone"),
            PaneState::Stale(StaleReason::SessionExited { .. })
        ));
        assert!(matches!(
            classify_session(listing, "gon"),
            PaneState::Stale(StaleReason::SessionMissing { .. })
        ));
        assert!(matches!(
            classify_session("", "any"),
            PaneState::Stale(StaleReason::SessionMissing { .. })
        ));
    }

    #[test]
    fn session_names_match_exactly_without_the_age_suffix() {
        // Older builds print bare names; a prefix must not match.
        assert_eq!(classify_session("lemur\n", "lemur"), PaneState::Live);
        assert!(matches!(
            classify_session("lemur-2\n", "lemur"),
            PaneState::Stale(_)
        ));
    }

    #[test]
    fn an_action_refused_for_a_missing_session_is_recognised() {
        // Both texts as zellij 0.45.1 prints them (whitespace collapsed by `process`).
        let named = "Session 'a b:c' not found. The following sessions are active: live";
        assert!(session_gone(named, "a b:c"));
        assert!(!session_gone(named, "live"));
        assert!(session_gone("There is no active session!", "any"));
        assert!(!session_gone(
            "error: unexpected argument '--json' found",
            "any"
        ));
    }

    #[test]
    fn pane_ids_parse_in_all_three_spellings() {
        assert_eq!(parse_pane_id("0"), Some((false, 0)));
        assert_eq!(parse_pane_id("terminal_12"), Some((false, 12)));
        assert_eq!(parse_pane_id("plugin_3"), Some((true, 3)));
        assert_eq!(parse_pane_id("terminal_"), None);
        assert_eq!(parse_pane_id("%1"), None);
        assert_eq!(parse_pane_id("+1"), None);
    }

    #[test]
    fn pane_guard_reads_list_panes_json() {
        let json = r#"[{"id":0,"is_plugin":false,"exited":false,"title":"claude"},
                       {"id":1,"is_plugin":false,"exited":true},
                       {"id":0,"is_plugin":true,"exited":false}]"#;
        assert_eq!(classify_pane(json, "terminal_0").unwrap(), PaneState::Live);
        assert_eq!(classify_pane(json, "plugin_0").unwrap(), PaneState::Live);
        assert_eq!(
            classify_pane(json, "1").unwrap(),
            PaneState::Stale(StaleReason::PaneDead)
        );
        assert_eq!(
            classify_pane(json, "7").unwrap(),
            PaneState::Stale(StaleReason::PaneMissing)
        );
        assert_eq!(classify_pane("nope", "0").unwrap_err().kind(), "output");
    }
}
