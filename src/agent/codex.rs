//! Codex CLI's answers at the seam, from `codex/`.

use std::path::{Path, PathBuf};

use crate::claude::settings::Wiring;
use crate::codex::home::CodexHome;
use crate::codex::{control, hooks, host, rollout, screen};
use crate::env::Env;
use crate::reading::inbox::Inbox;
use crate::reading::screen::{PromptReader, Screen, ScreenReading, Title};
use crate::reading::transcript::{LineReader, Turn, tail};

pub struct Codex;

impl super::Side for Codex {
    /// Its hooks run in a background app-server shared by the user's Codex TUIs, with the
    /// environment of the TUI that started it: a second TUI's hooks report the first one's
    /// pane (typing there would reach another session), bus id and `WAKEBRIDGE=keep`. Only its
    /// home is the same for all. A TUI that runs its thread itself runs them in its own pane's.
    fn hook_env(&self, env: &Env) -> Env {
        host::session_env(env, host::hook_host())
    }

    /// `codex::screen`.
    fn read_screen(&self, capture: &str) -> ScreenReading {
        screen::read(capture)
    }

    /// Its composer's `›` line (drawn under a running turn too, which `read` tells).
    fn prompt(&self) -> PromptReader {
        PromptReader {
            read: screen::read,
            shown: screen::composer_shown,
            draft: |capture| screen::read(capture).draft,
            without_own_resume: str::to_owned,
            paste_marker: Some(screen::PASTE_MARKER),
            typed_only_at_the_prompt: true,
            shows_every_turn: false,
        }
    }

    /// Its title says nothing of its turn.
    fn read_title(&self, _title: &str) -> Title {
        Title::Unknown
    }

    /// Its "Approaching rate limits" menu switches the model; it has none that waits.
    fn limit_menu_wait(&self) -> Option<fn(&str) -> Option<u8>> {
        None
    }

    /// From its rollout's tail (`codex::rollout`).
    fn last_turn(&self, transcript: &Path) -> Option<Turn> {
        let file = std::fs::File::open(transcript).ok()?;
        rollout::last_turn(&tail(file, rollout::TURN_TAIL_BYTES).ok()?)
    }

    fn wiring(&self) -> &'static Wiring {
        &hooks::WIRING
    }

    /// The control socket of its home, serving its thread (the session id): every TUI of that
    /// home shares the app-server, so the hook's `CODEX_HOME` is the session's.
    fn inbox_from_hook(&self, env: &Env, sid: &str) -> Option<Inbox> {
        // A TUI or `codex exec` running its thread itself is not served there.
        if host::hook_host() != host::HookHost::AppServer {
            return None;
        }
        Some(Inbox {
            socket: control::socket_of(&CodexHome::locate(env).ok()?),
            token: None,
            pid: None,
            thread: Some(sid.to_owned()),
        })
    }

    /// Its rollout, as its hooks name it: nothing to search.
    fn transcript_of(
        &self,
        _homes: &[PathBuf],
        _sid: &str,
        hint: Option<PathBuf>,
    ) -> Option<PathBuf> {
        hint.filter(|path| path.is_absolute() && path.extension().is_some_and(|e| e == "jsonl"))
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

    /// Its `/clear` starts a new chat whose id its hooks name only at the next prompt, and a TUI
    /// on the shared app-server has no pane to type it into; it compacts its own context instead.
    fn not_rewound(&self) -> Option<&'static str> {
        Some(
            "Codex CLI sessions are not rewound: its /clear starts a new chat whose id its hooks \
             name only at the next prompt, and Codex compacts its own context as the window fills",
        )
    }

    /// A turn that fails (429 at a usage limit) fires no Stop hook.
    fn hook_ends_a_failed_turn(&self) -> bool {
        false
    }

    /// Codex answers 429 `usage_limit_reached` once and waits for a person whatever the reset.
    /// Its composer looks the same for every session, and a TUI that joined the shared
    /// app-server maps no pane: one started where a killed TUI ran would be typed the old
    /// session's texts. A TUI running its thread holds its rollout open.
    fn pane_holds_its_transcript(&self) -> bool {
        true
    }

    fn resumes_at_the_reset(&self) -> bool {
        false
    }
}
