//! Claude Code's answers at the seam, from `claude/`.

use std::path::{Path, PathBuf};

use crate::claude::home;
use crate::claude::screen::first_run;
use crate::claude::settings::{WIRING, Wiring};
use crate::claude::transcript;
use crate::env::Env;
use crate::reading::inbox::Inbox;
use crate::reading::screen::Screen;
use crate::reading::transcript::LineReader;

pub struct ClaudeCode;

impl super::Side for ClaudeCode {
    /// Its hooks run in its own process, in its pane: all of it.
    fn hook_env(&self, env: &Env) -> Env {
        env.clone()
    }

    /// `claude::screen` reads its prompt, dialogs and menus.
    fn typed_into(&self) -> bool {
        true
    }

    fn wiring(&self) -> &'static Wiring {
        &WIRING
    }

    /// `CLAUDE_CODE_MESSAGING_SOCKET` and its token and pid.
    fn inbox_from_hook(&self, env: &Env, _sid: &str) -> Option<Inbox> {
        crate::claude::inbox::from_hook_env(env)
    }

    fn transcript_reader(&self) -> LineReader {
        transcript::read_line
    }

    fn first_run_reader(&self) -> fn(&str) -> Screen {
        first_run::classify
    }

    fn session_registry(&self) -> bool {
        true
    }

    /// `<config>/projects/<project>/<session>.jsonl`.
    fn account_of(&self, transcript: &Path) -> Option<PathBuf> {
        home::account_of(transcript)
    }

    /// Its transcript's "Held peer message" notice.
    fn holds_for_a_person(&self, sent_ms: Option<i64>, transcript: Option<&Path>) -> bool {
        crate::claude::inbox::held(sent_ms, transcript)
    }

    /// StopFailure.
    fn hook_ends_a_failed_turn(&self) -> bool {
        true
    }

    /// Claude Code 2.1.234+ continues by itself 30-90 s after the reset ("Continuing
    /// automatically at 3pm").
    fn resumes_at_the_reset(&self) -> bool {
        true
    }
}
