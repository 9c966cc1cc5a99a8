//! `wakebridge hook`: the command Claude Code's hooks call. It owns the event → action table
//! that keeps the wake dir in step with the session's lifecycle ([`action_for`]), pays an owed
//! wake on Stop, and records the session, its usage limits and its `/clear` renames in the
//! ledger. It must never block or fail the agent: it always exits 0 within a short budget,
//! reports problems on stderr only, and prints nothing else on stdout (SessionStart and
//! UserPromptSubmit stdout is added to the model's context). `--print-settings` prints the
//! `settings.json` snippet that wires it (deploy/claude-hooks.json).

use crate::agent::Agent;
use crate::claude::hooks::{
    HOOK_STDIN_CAP_BYTES, HookInput, HookInputError, SOURCE_CLEAR, SOURCE_COMPACT, WIRED_EVENTS,
    hook_group, keep_going, parse_hook_input,
};
use crate::claude::limits;
use crate::cli::session::SESSION_ID_ENVS;
use crate::clock;
use crate::config::{Config, ConfigError};
use crate::env::Env;
use crate::mux::WAKE_PROMPT;
use crate::reading::hook::{IDLE_PROMPT, QUOTA_AUTO_RESUMED};
use crate::store::{Alias, LimitSeen, LimitSource, Payment, Record, SessionSeen, Store};
use crate::wakedir::detect_target;
use crate::wakedir::markers::{clear_busy_if_any, is_busy, set_busy};
use crate::wakedir::target::PaneTarget;
use crate::wakedir::writer::{clear_entry, set_entry};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Longest wait for stdin to reach EOF: Claude Code writes the payload and closes the pipe at
/// once, so a slower stdin means something is wrong and the agent must not wait on it.
pub const HOOK_STDIN_BUDGET: Duration = Duration::from_secs(2);
/// Longest the whole hook may take: well under the snippet's `timeout`, so Claude Code never has
/// to kill it.
pub const HOOK_TOTAL_BUDGET: Duration = Duration::from_secs(5);
pub const HOOK_COMMAND: &str = "wakebridge hook";
/// A PreToolUse whose session was marked busy this recently is not recorded in the ledger again:
/// the hook runs on every tool call and must cost next to nothing there.
pub const LEDGER_REFRESH: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Default, clap::Args)]
pub struct HookArgs {
    /// Print the Claude Code settings.json snippet that wires every relevant hook event here
    #[arg(long)]
    pub print_settings: bool,
    /// Wake dir [default: the configuration's, as `serve` uses it]
    #[arg(long, value_name = "DIR")]
    pub wake_dir: Option<PathBuf>,
    /// The agent whose hook this is (`wakebridge codex install` writes `--agent codex`)
    #[arg(long, value_enum, default_value_t)]
    pub agent: Agent,
}

/// What a hook event does to the wake dir.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookAction {
    /// `keep_wake_state` for SessionStart(compact), which fires mid-turn.
    MapPane {
        keep_wake_state: bool,
    },
    MarkBusy,
    MarkIdle,
    /// This session's entry only, not the pane's others.
    ClearPane,
    Ignore,
}

pub fn action_for(input: &HookInput) -> HookAction {
    match input.event_name.as_str() {
        "SessionStart" => HookAction::MapPane {
            keep_wake_state: input.source.as_deref() == Some(SOURCE_COMPACT),
        },
        "UserPromptSubmit" | "PreToolUse" => HookAction::MarkBusy,
        "Stop" | "StopFailure" => HookAction::MarkIdle,
        "Notification" if input.notification_type.as_deref() == Some(IDLE_PROMPT) => {
            HookAction::MarkIdle
        }
        // The old id's end at a `/clear`: the agent stays in its pane, and the SessionStart that
        // follows maps it under its new id (recording the old one as renamed).
        "SessionEnd" if input.reason.as_deref() == Some(SOURCE_CLEAR) => HookAction::MarkIdle,
        "SessionEnd" => HookAction::ClearPane,
        _ => HookAction::Ignore,
    }
}

#[derive(Debug)]
pub enum HookResult {
    Done,
    /// Nothing to do (no session id, no multiplexer, an event not handled).
    Skipped,
    /// A busy marker or panes.json could not be written.
    Failed(Box<dyn std::error::Error + Send + Sync>),
}

/// One hook invocation, for the caller to log or record in the ledger.
#[derive(Debug)]
pub struct HookOutcome {
    pub session_id: Option<String>,
    pub cwd: Option<String>,
    pub pane: Option<PaneTarget>,
    pub result: HookResult,
    /// Ids unmapped as a side effect (evicted on SessionStart, removed on SessionEnd).
    pub unmapped: Vec<String>,
    /// A PreToolUse within `LEDGER_REFRESH` of the last busy mark: nothing to record.
    pub nothing_new: bool,
}

/// `AGENT_EVENT_BUS_SESSION_ID` (the reference CLI's rule: the explicit knob wins, so a session
/// registered on the bus under its own id keeps it), else the payload's `session_id`, else
/// `CLAUDE_CODE_SESSION_ID`. Empty values fall through.
pub fn hook_session_id(payload: Option<&str>, env: &Env) -> Option<String> {
    let [bus, claude] = SESSION_ID_ENVS;
    [env.get(bus), payload.map(str::to_owned), env.get(claude)]
        .into_iter()
        .flatten()
        .find(|id| !id.is_empty())
}

pub fn perform(input: &HookInput, wake_dir: &Path, env: &Env) -> HookOutcome {
    perform_as(action_for(input), input, wake_dir, env)
}

/// [`perform`] with the action decided by the caller (a paying Stop keeps the session busy).
fn perform_as(action: HookAction, input: &HookInput, wake_dir: &Path, env: &Env) -> HookOutcome {
    let pane = detect_target(env);
    let session_id = hook_session_id(input.session_id.as_deref(), env);
    let mut outcome = HookOutcome {
        session_id: session_id.clone(),
        cwd: input.cwd.clone(),
        pane: pane.clone(),
        result: HookResult::Done,
        unmapped: Vec::new(),
        nothing_new: false,
    };
    let Some(session_id) = session_id.filter(|_| action != HookAction::Ignore) else {
        outcome.result = HookResult::Skipped;
        return outcome;
    };
    let act = || -> Result<HookResult, Box<dyn std::error::Error + Send + Sync>> {
        match action {
            HookAction::MarkBusy => {
                outcome.nothing_new = input.event_name == "PreToolUse"
                    && is_busy(wake_dir, &session_id, LEDGER_REFRESH.as_secs_f64());
                set_busy(wake_dir, &session_id)?;
            }
            HookAction::MarkIdle => clear_busy_if_any(wake_dir, &session_id)?,
            HookAction::MapPane { keep_wake_state } => {
                if !keep_wake_state {
                    clear_busy_if_any(wake_dir, &session_id)?;
                }
                let Some(pane) = pane else {
                    return Ok(HookResult::Skipped);
                };
                outcome.unmapped = set_entry(wake_dir, &session_id, &pane)?.evicted;
            }
            HookAction::ClearPane => {
                clear_busy_if_any(wake_dir, &session_id)?;
                // Its own entry only: an agent killed in its pane (a restart's respawn) runs this
                // hook while, or after, its successor maps the pane, and that entry must stay.
                // Stale neighbours on the pane go when the next SessionStart maps it.
                outcome.unmapped = clear_entry(wake_dir, &session_id, None)?.removed;
            }
            HookAction::Ignore => return Ok(HookResult::Skipped),
        }
        Ok(HookResult::Done)
    };
    outcome.result = act().unwrap_or_else(HookResult::Failed);
    outcome
}

/// Reads `reader` to EOF, giving up after `budget` or past `cap` bytes: poll(2) lets a writer
/// that never closes the pipe not hold the agent up, with no thread to abandon.
pub fn read_bounded(
    mut reader: impl Read + AsFd,
    cap: usize,
    budget: Duration,
) -> Result<Vec<u8>, HookInputError> {
    let deadline = Instant::now() + budget;
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut poll = libc::pollfd {
            fd: reader.as_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let millis = libc::c_int::try_from(left.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd for a descriptor we hold.
        match unsafe { libc::poll(&mut poll, 1, millis) } {
            0 => return Err(HookInputError::Timeout(budget)),
            -1 if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {
                continue;
            }
            -1 => return Err(HookInputError::Read(std::io::Error::last_os_error())),
            _ => {}
        }
        match reader.read(&mut chunk) {
            Ok(0) => return Ok(bytes),
            Ok(n) if bytes.len() + n > cap => return Err(HookInputError::TooLarge { limit: cap }),
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(HookInputError::Read(e)),
        }
    }
}

/// The settings.json snippet wiring every relevant event to `command`.
pub fn settings_json(command: &str) -> Value {
    let group = |matcher| json!([hook_group(matcher, command)]);
    let hooks: serde_json::Map<String, Value> = (WIRED_EVENTS.iter())
        .map(|(event, matcher)| (event.to_string(), group(*matcher)))
        .collect();
    json!({ "hooks": hooks })
}

/// As printed by `--print-settings` (and stored in deploy/).
pub fn settings_text() -> String {
    format!("{:#}\n", settings_json(HOOK_COMMAND))
}

/// On a Stop of a session owed a wake, pays it by answering Claude Code with the wake prompt
/// (and how many events arrived, never what they say) as its reason to go on; committed only
/// once the answer is written. Not with `stop_hook_active`: blocks in a row would loop into
/// Claude Code's block cap; the daemon types that wake once the session is idle instead.
/// Returns whether the turn goes on.
fn pay_on_stop(input: &HookInput, env: &Env, ledger: &Path) -> bool {
    if input.event_name != "Stop" || input.stop_hook_active {
        return false;
    }
    let Some(sid) = hook_session_id(input.session_id.as_deref(), env) else {
        return false;
    };
    let paid = Store::pay_once(ledger, &sid, Payment::Hook, |events| {
        let plural = if events == 1 { "" } else { "s" };
        let reason = format!(
            "{WAKE_PROMPT} ({events} directed event{plural} arrived while you were working.)"
        );
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", keep_going(&reason))
            .and_then(|()| out.flush())
            .is_ok()
    });
    paid.inspect_err(|e| crate::errln!("wakebridge hook: could not pay the owed wake: {e}"))
        .is_ok_and(|events| events > 0)
}

/// `wakebridge hook` against the real stdin, environment and stderr. Always exits 0. Every
/// outcome is recorded in the ledger on the action thread, inside the same overall budget; usage
/// limits only with `[limits] enabled`.
pub fn run(args: &HookArgs, config: Result<Config, ConfigError>) -> ExitCode {
    // `--print-settings`: the configuration plays no part in the snippet.
    if args.print_settings {
        let _ = std::io::stdout().write_all(settings_text().as_bytes());
        return ExitCode::SUCCESS;
    }
    let started = Instant::now();
    let input = read_bounded(std::io::stdin(), HOOK_STDIN_CAP_BYTES, HOOK_STDIN_BUDGET)
        .and_then(|bytes| parse_hook_input(&bytes))
        .map_err(|e| e.to_string());
    let ready = input.and_then(|input| Ok((input, config.map_err(|e| e.to_string())?)));
    let (input, config) = match ready {
        Ok(ready) => ready,
        Err(message) => {
            crate::errln!("wakebridge hook: {message}");
            return ExitCode::SUCCESS;
        }
    };
    let (wake_dir, ledger) = (config.paths.wake_dir, config.paths.ledger);
    let track_limits = config.settings.limits.enabled;
    // Where the hook runs outside the session's process (Codex's app-server), its environment
    // says nothing of the session: no pane, bus id or keep flag is read from it.
    let agent = args.agent;
    let env = agent.side().hook_env(&Env::process());
    let action = if pay_on_stop(&input, &env, &ledger) {
        HookAction::MarkBusy
    } else {
        action_for(&input)
    };
    let event = input.event_name.clone();
    let report_failure = |outcome: &HookOutcome| {
        if let HookResult::Failed(message) = &outcome.result {
            crate::errln!("wakebridge hook: {event} failed: {message}");
        }
    };
    let act = move || {
        let outcome = perform_as(action, &input, &wake_dir, &env);
        record(&ledger, &outcome, agent, &input, &env, track_limits);
        outcome
    };
    if !matches!(action, HookAction::MapPane { .. } | HookAction::ClearPane) {
        // A marker only: nothing here can block, so no helper thread is needed.
        report_failure(&act());
        return ExitCode::SUCCESS;
    }
    // panes.json's flock has no timeout; a helper thread lets the agent go on regardless.
    let (sender, receiver) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("hook-action".into())
        .spawn(move || drop(sender.send(act())));
    if let Err(e) = spawned {
        crate::errln!("wakebridge hook: cannot start the hook action: {e}");
        return ExitCode::SUCCESS;
    }
    let left = HOOK_TOTAL_BUDGET.saturating_sub(started.elapsed());
    match receiver.recv_timeout(left) {
        Ok(outcome) => report_failure(&outcome),
        Err(_) => crate::errln!(
            "wakebridge hook: gave up after {HOOK_TOTAL_BUDGET:?} (is panes.lock held by a stuck process?)"
        ),
    }
    ExitCode::SUCCESS
}

/// The entry for `hook`, which runs on every tool call: building every verb's clap definition
/// cost more than the hook's own work. `None` for anything it does not read exactly as clap
/// would (`--help`, a repeated or unknown flag, a missing, empty or dash-led value, non-UTF-8).
pub fn fast_main(args: &[std::ffi::OsString]) -> Option<ExitCode> {
    let (hook_args, config) = parse_own_flags(args)?;
    let wake_dir = hook_args.wake_dir.as_deref();
    Some(run(&hook_args, super::resolve(config, wake_dir)))
}

/// Each flag at most once, in any order, its value next or after `=`.
fn parse_own_flags(args: &[std::ffi::OsString]) -> Option<(HookArgs, Option<PathBuf>)> {
    let (verb, rest) = args.split_first()?;
    if verb != "hook" {
        return None;
    }
    let mut parsed = HookArgs::default();
    let mut config = None;
    let mut agent_given = false;
    let mut rest = rest.iter();
    while let Some(arg) = rest.next() {
        let arg = arg.to_str()?;
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (arg, None),
        };
        let slot = match name {
            "--print-settings" if inline.is_none() && !parsed.print_settings => {
                parsed.print_settings = true;
                continue;
            }
            "--agent" if !agent_given => {
                let value = inline.or_else(|| rest.next()?.to_str())?;
                parsed.agent = value.parse().ok()?;
                agent_given = true;
                continue;
            }
            "--wake-dir" if parsed.wake_dir.is_none() => &mut parsed.wake_dir,
            "--config" if config.is_none() => &mut config,
            _ => return None,
        };
        let value = inline.or_else(|| rest.next()?.to_str())?;
        if value.is_empty() || value.starts_with('-') {
            return None;
        }
        *slot = Some(PathBuf::from(value));
    }
    Some((parsed, config))
}

/// Records in one commit the session (scope = local), its transcript and last hook event (for
/// the nudger), its usage limit ([`limit_record`]), its `/clear` renames ([`renames`]) and its
/// inbox ([`inbox_record`]).
fn record(
    ledger: &Path,
    outcome: &HookOutcome,
    agent: Agent,
    input: &HookInput,
    env: &Env,
    limits: bool,
) {
    let Some(session_id) = outcome.session_id.clone().filter(|_| !outcome.nothing_new) else {
        return;
    };
    let now_ms = clock::now_ms();
    let limit = limits.then(|| limit_record(input, &session_id, now_ms));
    let inbox = inbox_record(agent, input, env, &session_id, now_ms);
    let seen = SessionSeen {
        session_id,
        cwd: outcome.cwd.clone(),
        transcript_path: input.transcript_path.clone(),
        pane: outcome.pane.as_ref().map(ToString::to_string),
        last_hook_event: Some(input.recorded_event()),
        seen_at_ms: now_ms,
        // Read at its start only: the hook runs on every tool call.
        kept: input.event_name == "SessionStart" && env.asks_to_be_kept(),
        agent,
    };
    let renamed = renames(outcome, input, now_ms);
    let batch = std::iter::once(Record::SessionSeen(seen))
        .chain(limit.flatten())
        .chain(renamed)
        .chain(inbox)
        .collect();
    if let Err(e) = Store::record_once(ledger, batch) {
        crate::errln!("wakebridge hook: could not record the session in the ledger: {e}");
    }
}

/// SessionStart records where the session's inbox is (after a `/clear` too: the new id keeps
/// the socket); UserPromptSubmit records which prompt it reported, so that a message the daemon
/// sent there is known to have arrived. Nothing for a session without an inbox. A Codex
/// session's inbox is its home's control socket, serving its thread (the session id).
fn inbox_record(
    agent: Agent,
    input: &HookInput,
    env: &Env,
    session_id: &str,
    now_ms: i64,
) -> Option<Record> {
    // The environment is read only for the two events that record an inbox (not PreToolUse).
    let inbox = || agent.side().inbox_from_hook(env, session_id);
    match &*input.event_name {
        "SessionStart" => Some(Record::InboxSeen {
            session_id: session_id.to_owned(),
            inbox: inbox()?,
            at_ms: now_ms,
        }),
        "UserPromptSubmit" if inbox().is_some() => Some(Record::InboxHeard {
            session_id: session_id.to_owned(),
            digest: crate::reading::inbox::digest(input.prompt.as_deref()?),
            at_ms: now_ms,
        }),
        _ => None,
    }
}

/// After `/clear` the same agent maps its pane under a new id: the ids it unmapped (which the
/// bus and its peers still use) are recorded as renamed. Any other start renames nothing.
fn renames(outcome: &HookOutcome, input: &HookInput, now_ms: i64) -> Vec<Record> {
    let (Some(new_id), Some(pane)) = (&outcome.session_id, &outcome.pane) else {
        return Vec::new();
    };
    if input.event_name != "SessionStart" || input.source.as_deref() != Some(SOURCE_CLEAR) {
        return Vec::new();
    }
    outcome
        .unmapped
        .iter()
        .filter(|old_id| *old_id != new_id)
        .map(|old_id| {
            Record::Renamed(Alias {
                old_id: old_id.clone(),
                new_id: new_id.clone(),
                pane: pane.to_string(),
                at_ms: now_ms,
            })
        })
        .collect()
}

/// A `StopFailure` of a rate limit with Claude Code's notice records a limit; a tool call, a
/// normal Stop and Claude Code's auto-resume lift it. A prompt submitted does not: the resume
/// message itself is one.
fn limit_record(input: &HookInput, session_id: &str, now_ms: i64) -> Option<Record> {
    let lifted = match input.event_name.as_str() {
        "PreToolUse" | "Stop" => true,
        "Notification" => input.notification_type.as_deref() == Some(QUOTA_AUTO_RESUMED),
        _ => false,
    };
    if lifted {
        return Some(Record::LimitLifted {
            session_id: session_id.to_owned(),
        });
    }
    let notice = limits::in_stop_failure(
        input.error.as_deref(),
        input.last_assistant_message.as_deref(),
    )?;
    Some(Record::Limited(LimitSeen::of_notice(
        session_id,
        notice,
        LimitSource::Hook,
        now_ms,
        true,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn input(event: &str) -> HookInput {
        HookInput {
            event_name: event.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_rate_limit_stop_failure_is_a_limit_and_signs_of_work_lift_it() {
        let failure = HookInput {
            error: Some("rate_limit".into()),
            last_assistant_message: Some("You've hit your session limit · resets in 2h".into()),
            ..input("StopFailure")
        };
        let Some(Record::Limited(seen)) = limit_record(&failure, "s", 1_000) else {
            panic!("no limit");
        };
        assert_eq!(
            seen.resets_at_ms,
            Some(1_000 + 7_200_000 + crate::reading::limit::TO_THE_MINUTE_MS),
            "the end of the minute it shows"
        );
        assert_eq!((seen.how, seen.at_ms), (LimitSource::Hook, 1_000));
        // A transient 429 (no notice) and another error are not limits.
        let transient = HookInput {
            last_assistant_message: Some("API Error: 429 overloaded".into()),
            ..failure.clone()
        };
        assert_eq!(limit_record(&transient, "s", 1_000), None);
        for lifting in ["PreToolUse", "Stop"] {
            assert!(matches!(
                limit_record(&input(lifting), "s", 1),
                Some(Record::LimitLifted { .. })
            ));
        }
        let resumed = HookInput {
            notification_type: Some(QUOTA_AUTO_RESUMED.into()),
            ..input("Notification")
        };
        assert!(matches!(
            limit_record(&resumed, "s", 1),
            Some(Record::LimitLifted { .. })
        ));
        // The resume message itself submits a prompt: no sign the limit lifted.
        assert_eq!(limit_record(&input("UserPromptSubmit"), "s", 1), None);
    }

    #[test]
    fn event_table() {
        let start = |source: &str| HookInput {
            source: Some(source.into()),
            ..input("SessionStart")
        };
        assert_eq!(
            action_for(&start("startup")),
            HookAction::MapPane {
                keep_wake_state: false
            }
        );
        assert_eq!(
            action_for(&start("compact")),
            HookAction::MapPane {
                keep_wake_state: true
            }
        );
        assert_eq!(action_for(&input("UserPromptSubmit")), HookAction::MarkBusy);
        assert_eq!(action_for(&input("PreToolUse")), HookAction::MarkBusy);
        assert_eq!(action_for(&input("Stop")), HookAction::MarkIdle);
        assert_eq!(action_for(&input("StopFailure")), HookAction::MarkIdle);
        assert_eq!(action_for(&input("SessionEnd")), HookAction::ClearPane);
        let cleared = HookInput {
            reason: Some("clear".into()),
            ..input("SessionEnd")
        };
        assert_eq!(action_for(&cleared), HookAction::MarkIdle);
        let notification = |kind: &str| HookInput {
            notification_type: Some(kind.into()),
            ..input("Notification")
        };
        assert_eq!(
            action_for(&notification("idle_prompt")),
            HookAction::MarkIdle
        );
        assert_eq!(
            action_for(&notification("permission_prompt")),
            HookAction::Ignore
        );
        assert_eq!(action_for(&input("PostToolUse")), HookAction::Ignore);
    }

    #[test]
    fn deploy_snippet_matches_print_settings() {
        assert_eq!(
            include_str!("../../deploy/claude-hooks.json"),
            settings_text(),
            "regenerate deploy/claude-hooks.json with `wakebridge hook --print-settings`"
        );
    }

    #[test]
    fn settings_wire_every_handled_event_to_the_hook() {
        let settings = settings_json(HOOK_COMMAND);
        for (event, matcher) in WIRED_EVENTS {
            let entry = &settings["hooks"][event][0];
            assert_eq!(entry["hooks"][0]["command"], HOOK_COMMAND, "{event}");
            let mut probe = input(event);
            // The first type a matcher names moves the wake state; the others (Claude Code's
            // own resume at a usage limit) only lift a limit in the ledger.
            probe.notification_type = (matcher.unwrap_or_default())
                .split('|')
                .find(|m| !m.is_empty())
                .map(str::to_owned);
            assert_ne!(
                action_for(&probe),
                HookAction::Ignore,
                "{event} is wired but ignored"
            );
        }
    }

    /// A pipe holding `bytes`, its writer closed.
    fn piped(bytes: &[u8]) -> std::io::PipeReader {
        let (reader, mut writer) = std::io::pipe().unwrap();
        writer.write_all(bytes).unwrap();
        reader
    }

    #[test]
    fn bounded_read_stops_at_the_cap_and_the_budget() {
        let bytes = read_bounded(piped(b"abc"), 3, HOOK_STDIN_BUDGET);
        assert_eq!(bytes.expect("within the cap"), b"abc");
        let over = read_bounded(piped(b"abcd"), 3, HOOK_STDIN_BUDGET);
        assert!(matches!(over, Err(HookInputError::TooLarge { limit: 3 })));
        let endless = std::fs::File::open("/dev/zero").unwrap();
        let over = read_bounded(endless, 16, HOOK_STDIN_BUDGET);
        assert!(matches!(over, Err(HookInputError::TooLarge { limit: 16 })));
    }

    /// The fast path reads `hook`'s flags exactly as clap does, and leaves everything else
    /// (help, errors, other verbs) to clap.
    #[test]
    fn own_flags_read_as_clap_reads_them_or_not_at_all() {
        use clap::Parser as _;
        let read = [
            "hook",
            "hook --print-settings",
            "hook --wake-dir /w",
            "hook --wake-dir=/w --config /c.toml",
            "hook --config=/c.toml --print-settings --wake-dir w",
            "hook --agent codex",
            "hook --agent=claude --wake-dir /w",
        ];
        let left = [
            "",
            "status",
            "--config /c.toml hook",
            "hook --help",
            "hook -h",
            "hook extra",
            "hook --print-settings --print-settings",
            "hook --print-settings=yes",
            "hook --wake-dir",
            "hook --wake-dir=",
            "hook --wake-dir --print-settings",
            "hook --wake-dir /a --wake-dir /b",
            "hook --port 9",
            "hook --agent",
            "hook --agent gemini",
            "hook --agent codex --agent codex",
            "hook --",
        ];
        let argv = |line: &str| -> Vec<std::ffi::OsString> {
            line.split_whitespace().map(Into::into).collect()
        };
        for line in read {
            let (args, config) = parse_own_flags(&argv(line)).expect(line);
            let cli = crate::cli::Cli::try_parse_from(
                std::iter::once("wakebridge").chain(line.split_whitespace()),
            )
            .expect(line);
            let Some(crate::cli::Command::Hook(by_clap)) = cli.command else {
                panic!("{line}: not the hook verb for clap");
            };
            assert_eq!(args.print_settings, by_clap.print_settings, "{line}");
            assert_eq!(args.wake_dir, by_clap.wake_dir, "{line}");
            assert_eq!(args.agent, by_clap.agent, "{line}");
            assert_eq!(config, cli.config, "{line}");
        }
        for line in left {
            assert!(parse_own_flags(&argv(line)).is_none(), "{line}");
        }
        use std::os::unix::ffi::OsStringExt as _;
        let not_utf8 = std::ffi::OsString::from_vec(vec![b'/', 0xff]);
        assert!(parse_own_flags(&["hook".into(), "--wake-dir".into(), not_utf8]).is_none());
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = parse_hook_input(&bytes);
        }

        #[test]
        fn parse_never_panics_on_json_like_text(text in r#"[{}\[\]":,a-z0-9 \\]{0,200}"#) {
            let _ = parse_hook_input(text.as_bytes());
        }
    }
}
