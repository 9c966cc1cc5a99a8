//! Codex CLI's answers at the seam, from `codex/`.

use std::path::{Path, PathBuf};

use crate::claude::settings::Wiring;
use crate::codex::home::{CodexHome, HOME_ENV};
use crate::codex::{control, hooks, rollout, screen};
use crate::env::Env;
use crate::reading::inbox::Inbox;
use crate::reading::screen::Screen;
use crate::reading::transcript::LineReader;

pub struct Codex;

impl super::Side for Codex {
    /// Its hooks run in a background app-server shared by the user's Codex TUIs, with the
    /// environment of the TUI that started it: a second TUI's hooks report the first one's
    /// pane (typing there would reach another session), bus id and `WAKEBRIDGE=keep`. Only its
    /// home is the same for all.
    fn hook_env(&self, env: &Env) -> Env {
        env.only(&["HOME", HOME_ENV])
    }

    /// Not yet: its screens are not read, and its composer shows while a turn runs and under
    /// its "Approaching rate limits" menu, where a typed `continue` would switch the model. Its
    /// control socket tells it everything; what that cannot reach waits for its Stop hook.
    fn typed_into(&self) -> bool {
        false
    }

    fn wiring(&self) -> &'static Wiring {
        &hooks::WIRING
    }

    /// The control socket of its home, serving its thread (the session id): every TUI of that
    /// home shares the app-server, so the hook's `CODEX_HOME` is the session's.
    fn inbox_from_hook(&self, env: &Env, sid: &str) -> Option<Inbox> {
        Some(Inbox {
            socket: control::socket_of(&CodexHome::locate(env).ok()?),
            token: None,
            pid: None,
            thread: Some(sid.to_owned()),
        })
    }

    fn transcript_reader(&self) -> LineReader {
        rollout::read_line
    }

    fn first_run_reader(&self) -> fn(&str) -> Screen {
        screen::first_run
    }

    /// Its session starts at the first prompt, and its SessionStart hook makes it known.
    fn session_registry(&self) -> bool {
        false
    }

    /// `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-….jsonl`.
    fn account_of(&self, transcript: &Path) -> Option<PathBuf> {
        rollout::home_of(transcript)
    }

    /// A `turn/start` is run or folded into the running turn; nothing holds it.
    fn holds_for_a_person(&self, _sent_ms: Option<i64>, _transcript: Option<&Path>) -> bool {
        false
    }

    /// A turn that fails (429 at a usage limit) fires no Stop hook.
    fn hook_ends_a_failed_turn(&self) -> bool {
        false
    }

    /// Codex answers 429 `usage_limit_reached` once and waits for a person whatever the reset.
    fn resumes_at_the_reset(&self) -> bool {
        false
    }
}
