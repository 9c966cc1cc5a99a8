//! Claude Code's answers at the seam, from `claude/`.

use std::path::{Path, PathBuf};

use super::Side;
use crate::claude::home;
use crate::claude::limits;
use crate::claude::screen::{self, first_run};
use crate::claude::settings::{WIRING, Wiring};
use crate::claude::{transcript, turn};
use crate::env::Env;
use crate::reading::inbox::Inbox;
use crate::reading::screen::{LimitShown, PromptReader, Screen, ScreenReading, Title};
use crate::reading::transcript::{LineReader, Turn, tail};

pub struct ClaudeCode;

impl Side for ClaudeCode {
    /// Its hooks run in its own process, in its pane: all of it.
    fn hook_env(&self, env: &Env) -> Env {
        env.clone()
    }

    /// `claude::screen`, and the limit's notice, menu and auto-continue by `claude::limits`.
    fn read_screen(&self, capture: &str) -> ScreenReading {
        let limit = Some(LimitShown {
            notice: limits::on_screen(capture),
            menu: limits::wait_option(capture).is_some(),
            resuming_itself: limits::auto_continue_armed(capture),
        });
        ScreenReading {
            limit,
            ..screen::read(capture)
        }
    }

    /// Its input box's `❯` line; a long text taken as a paste shows as `[Pasted text …]`.
    fn prompt(&self) -> PromptReader {
        PromptReader {
            read: |capture| ClaudeCode.read_screen(capture),
            shown: |capture| capture.lines().any(|line| screen::input(line).is_some()),
            draft: screen::draft,
            without_own_resume: limits::without_auto_continue,
            paste_marker: Some(screen::PASTE_MARKER),
            typed_only_at_the_prompt: false,
            shows_every_turn: true,
        }
    }

    /// `✳ Claude Code` while idle, a spinner glyph while busy.
    fn read_title(&self, title: &str) -> Title {
        screen::title_state(title)
    }

    /// "Stop and wait for limit to reset".
    fn limit_menu_wait(&self) -> Option<fn(&str) -> Option<u8>> {
        Some(limits::wait_option)
    }

    /// From its transcript's tail (`claude::turn`).
    fn last_turn(&self, transcript: &Path) -> Option<Turn> {
        let file = std::fs::File::open(transcript).ok()?;
        turn::last_turn(&tail(file, turn::TAIL_BYTES).ok()?)
    }

    fn wiring(&self) -> &'static Wiring {
        &WIRING
    }

    /// `CLAUDE_CODE_MESSAGING_SOCKET` and its token and pid.
    fn inbox_from_hook(&self, env: &Env, _sid: &str) -> Option<Inbox> {
        crate::claude::inbox::from_hook_env(env)
    }

    /// The hint unless it is a subagent's, else the newest `<home>/projects/*/<sid>.jsonl`.
    fn transcript_of(
        &self,
        homes: &[PathBuf],
        sid: &str,
        hint: Option<PathBuf>,
    ) -> Option<PathBuf> {
        let plausible = |path: &PathBuf| {
            path.is_absolute()
                && path.extension().is_some_and(|e| e == "jsonl")
                && !home::is_under_subagents(path)
        };
        home::find_transcript_in(homes, sid, hint.as_deref()).or_else(|| hint.filter(plausible))
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

    /// `/clear`, its fresh prompt, and the new id its SessionStart hook names at once.
    fn not_rewound(&self) -> Option<&'static str> {
        None
    }

    /// StopFailure.
    fn hook_ends_a_failed_turn(&self) -> bool {
        true
    }

    /// Claude Code 2.1.234+ continues by itself 30-90 s after the reset ("Continuing
    /// automatically at 3pm").
    /// Each session started in a pane maps it at its SessionStart hook, taking it from the last.
    fn pane_holds_its_transcript(&self) -> bool {
        false
    }

    fn resumes_at_the_reset(&self) -> bool {
        true
    }
}
