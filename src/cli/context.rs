//! The `wakebridge statusline` and `wakebridge context` verbs.
//!
//! This module owns their arguments (clap `Args` types the top-level CLI embeds) and their
//! `run(args, config) -> ExitCode` functions: thin I/O shells over `statusline`, `follow` and
//! `figures`, with every default from the configuration `serve` uses (a flag overrides it), and
//! `statusline --wrap`'s running of the user's own status-line command (same input, a deadline,
//! its process group killed past it). It does not own the top-level command enum.

use std::io::{IsTerminal, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use clap::Args;

use crate::config::{Config, ConfigError};
use crate::context::follow::{TranscriptFollower, find_transcript_in};
use crate::context::statusline::{
    WRAPPED_BUDGET, marker_activity, parse_statusline, read_bounded, read_feed, render_line,
    wrapped_line, write_feed,
};
use crate::context::window::WindowResolver;
use crate::context::{ContextReport, figures};
use crate::deadline::Deadline;
use crate::wire::session_id::SessionId;

/// Exit code when the transcript cannot be found or read.
const EXIT_NOT_FOUND: u8 = 1;
/// Exit code for arguments that cannot work (bad session id, zero window).
const EXIT_USAGE: u8 = 2;
/// Most bytes kept of the wrapped command's output: a status line is a few hundred.
const WRAPPED_OUTPUT_CAP: u64 = 64 * 1024;

/// `wakebridge statusline`: a Claude Code statusLine command.
#[derive(Debug, Clone, Args)]
pub struct StatuslineArgs {
    /// Wake dir holding `<session_id>.busy` markers [default: the configuration's]
    #[arg(long)]
    pub wake_dir: Option<PathBuf>,
    /// Age after which a busy marker no longer counts, in seconds [default: the configuration's
    /// busy_ttl]
    #[arg(long)]
    pub busy_ttl: Option<u64>,
    /// The user's own status-line command (run with `sh -c` on the same input, under a short
    /// deadline): its output is printed first and wakebridge's line added to it
    #[arg(long, value_name = "COMMAND")]
    pub wrap: Option<String>,
}

/// `wakebridge context`: print a session's context figures.
#[derive(Debug, Clone, Args)]
pub struct ContextArgs {
    /// Session id, or a unique prefix of one (as `status` shows it); its transcript is looked up
    /// under the Claude Code config dirs.
    #[arg(
        long,
        alias = "session-id",
        value_name = "ID",
        required_unless_present = "transcript"
    )]
    pub session: Option<String>,
    /// Transcript file to read (takes precedence over the lookup).
    #[arg(long)]
    pub transcript: Option<PathBuf>,
    /// Print JSON instead of a sentence.
    #[arg(long)]
    pub json: bool,
    /// Window for models nothing else identifies [default: context.default_window]
    #[arg(long)]
    pub default_window: Option<u64>,
    /// How old a status-line feed may be and still be preferred [default: context.feed_max_age]
    #[arg(long, value_parser = crate::config::duration::parse)]
    pub feed_max_age: Option<Duration>,
    /// The daemon's base URL, asked when --session is a prefix [default: from the configuration]
    #[arg(long)]
    pub url: Option<String>,
}

/// Runs `wakebridge statusline`: always prints a line and exits 0 (a failing statusLine command
/// would only blank Claude Code's status bar).
pub fn run_statusline(args: &StatuslineArgs, config: Result<Config, ConfigError>) -> ExitCode {
    let deadline = Deadline::after(WRAPPED_BUDGET);
    let stdin = std::io::stdin();
    // Run by hand on a terminal there is no payload; do not wait for one.
    let input = if stdin.is_terminal() {
        Vec::new()
    } else {
        read_bounded(stdin.lock())
    };
    // The user's command runs while our line is worked out.
    let wrapped = args
        .wrap
        .as_deref()
        .and_then(|command| Wrapped::start(command, &input));
    let line = our_line(args, config, &input);
    let line = match wrapped {
        Some(wrapped) => wrapped_line(wrapped.finish(&deadline).as_deref(), &line),
        None => line,
    };
    let mut out = std::io::stdout().lock();
    // A closed stdout leaves nobody to tell.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
    ExitCode::SUCCESS
}

/// The user's status-line command, started on the status line's input.
struct Wrapped {
    /// Its process group (it leads one of its own), for the kill.
    pid: u32,
    /// Its output once it exited 0, `None` once it failed.
    done: mpsc::Receiver<Option<Vec<u8>>>,
}

impl Wrapped {
    /// Starts `sh -c command` in its own process group with `input` on its stdin; `None` (and a
    /// word on stderr) when it cannot start.
    fn start(command: &str, input: &[u8]) -> Option<Wrapped> {
        let spawned = std::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                crate::errln!("wakebridge statusline: cannot run the wrapped command: {e}");
                return None;
            }
        };
        let pid = child.id();
        if let Some(mut stdin) = child.stdin.take() {
            let input = input.to_vec();
            // A command that never reads its stdin must not hold us up: written aside, and
            // the pipe closed once written (or broken by its exit).
            std::thread::spawn(move || {
                let _ = stdin.write_all(&input);
            });
        }
        let stdout = child.stdout.take();
        let (sender, done) = mpsc::channel();
        std::thread::spawn(move || {
            let mut out = Vec::new();
            if let Some(stdout) = stdout {
                let _ = stdout.take(WRAPPED_OUTPUT_CAP).read_to_end(&mut out);
            }
            let succeeded = child.wait().is_ok_and(|status| status.success());
            let _ = sender.send(succeeded.then_some(out));
        });
        Some(Wrapped { pid, done })
    }

    /// Its output, waited for until `deadline`; past it the command's process group is killed
    /// and there is none.
    fn finish(self, deadline: &Deadline) -> Option<Vec<u8>> {
        match self.done.recv_timeout(deadline.remaining()) {
            Ok(output) => output,
            Err(_) => {
                if let Ok(group) = i32::try_from(self.pid) {
                    // SAFETY: kill(2) takes no pointers; a negative pid signals that process
                    // group. The child leads its own (process_group(0)) and only the reader
                    // thread reaps it, after its output ends; a reap in the instant since the
                    // timeout leaves an id no new group can have taken that fast.
                    unsafe { libc::kill(-group, libc::SIGKILL) };
                }
                crate::errln!(
                    "wakebridge statusline: the wrapped command did not finish within {}ms and was killed; showing wakebridge's line alone",
                    WRAPPED_BUDGET.as_millis()
                );
                None
            }
        }
    }
}

/// wakebridge's own line for `input`, feeding the daemon on the way.
fn our_line(args: &StatuslineArgs, config: Result<Config, ConfigError>, input: &[u8]) -> String {
    // The status bar shows whatever the line says, so even a bad configuration gets one.
    let config = match config {
        Ok(config) => config,
        Err(e) => {
            crate::errln!("wakebridge statusline: {e}");
            return crate::context::statusline::UNKNOWN_LINE.to_owned();
        }
    };
    let state_dir = &config.paths.state_dir;
    let feed = parse_statusline(input, crate::clock::now_s());
    if let Some(feed) = &feed
        && let Err(err) = write_feed(state_dir, feed)
    {
        // stderr is not shown in the status bar; it helps whoever runs the command by hand.
        crate::errln!("wakebridge statusline: {err}");
    }
    let busy_ttl = args.busy_ttl.map_or_else(
        || Duration::try_from_secs_f64(config.busy_ttl).unwrap_or(Duration::MAX),
        Duration::from_secs,
    );
    let activity = feed
        .as_ref()
        .map(|feed| marker_activity(&config.paths.wake_dir, &feed.session_id, busy_ttl));
    render_line(feed.as_ref(), activity)
}

/// Runs `wakebridge context`.
pub fn run_context(args: &ContextArgs, config: &Config) -> ExitCode {
    let settings = &config.settings.context;
    let state_dir = &config.paths.state_dir;
    let default_window = args.default_window.unwrap_or(settings.default_window);
    let feed_max_age = args.feed_max_age.unwrap_or(settings.feed_max_age);
    let models = settings.models.iter().map(|(k, v)| (k.as_str(), *v));
    let resolver = match WindowResolver::new(models, default_window) {
        Ok(r) => r,
        Err(err) => {
            crate::errln!("wakebridge context: {err}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if let Some(sid) = &args.session
        && !SessionId::is_valid(sid)
    {
        crate::errln!(
            "wakebridge context: session id {sid:?} is not valid; expected letters, digits, '-' or '_'"
        );
        return ExitCode::from(EXIT_USAGE);
    }
    let homes: Vec<_> = config.paths.claude.iter().cloned().collect();
    // A prefix (as `status` shows ids) names its session through the daemon; a full id, or one
    // whose transcript is here, needs no daemon at all.
    let session = match &args.session {
        Some(sid)
            if !crate::cli::prefix::is_full_id(sid)
                && find_transcript_in(&homes, sid, None).is_none() =>
        {
            let base = crate::cli::client::daemon_url(config, args.url.as_deref());
            match crate::cli::client::resolve_id(config, "context", &base, sid) {
                Some(id) => Some(id),
                None => return ExitCode::from(EXIT_USAGE),
            }
        }
        other => other.clone(),
    };
    let session_id = session.or_else(|| {
        args.transcript
            .as_deref()
            .and_then(Path::file_stem)
            .and_then(|s| s.to_str())
            .filter(|s| SessionId::is_valid(s))
            .map(str::to_owned)
    });
    let feed = session_id
        .as_deref()
        .and_then(|sid| read_feed(state_dir, sid, feed_max_age));
    let hint = args
        .transcript
        .clone()
        .or_else(|| feed.as_ref().and_then(|f| f.transcript_path.clone()));
    let transcript = match (&args.transcript, &session_id) {
        (Some(path), _) => Some(path.clone()),
        (None, Some(sid)) => find_transcript_in(&homes, sid, hint.as_deref()),
        (None, None) => None,
    };
    let reading = match &transcript {
        Some(path) => {
            let mut follower = TranscriptFollower::new(path);
            match follower.poll() {
                Ok(outcome) if outcome.event == crate::context::follow::PollEvent::Missing => {
                    crate::errln!(
                        "wakebridge context: transcript {} does not exist (Claude Code creates it at the first prompt)",
                        path.display()
                    );
                    return ExitCode::from(EXIT_NOT_FOUND);
                }
                Ok(_) => follower.current().cloned(),
                Err(err) => {
                    crate::errln!("wakebridge context: {err}");
                    return ExitCode::from(EXIT_NOT_FOUND);
                }
            }
        }
        None if feed.is_some() => None,
        None => {
            crate::errln!(
                "wakebridge context: no transcript found for session {:?}; pass --transcript PATH or check {}",
                session_id.as_deref().unwrap_or(""),
                crate::claude::home::CONFIG_DIR_ENV
            );
            return ExitCode::from(EXIT_NOT_FOUND);
        }
    };
    let figures = figures(reading.as_ref(), feed.as_ref(), &resolver);
    let report = ContextReport::new(session_id, transcript, &figures);
    let text = if args.json {
        serde_json::to_string(&report).unwrap_or_default()
    } else {
        describe(&report)
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    ExitCode::SUCCESS
}

/// One human sentence for `wakebridge context`.
fn describe(r: &ContextReport) -> String {
    let model = r.model.as_deref().unwrap_or("unknown model");
    match (r.used_tokens, r.percent) {
        (Some(used), Some(pct)) => format!(
            "{pct:.1}% of the context window in use: {used} of {} tokens ({model}; window from {}, usage from {})",
            r.context_window,
            r.source,
            r.usage_source.unwrap_or("?"),
        ),
        _ => format!(
            "no context usage recorded yet ({model}; window {} tokens from {})",
            r.context_window, r.source
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        context: ContextArgs,
    }

    #[test]
    fn context_args_need_session_or_transcript() {
        assert!(Wrap::try_parse_from(["x"]).is_err());
        assert!(Wrap::try_parse_from(["x", "--session", "abc"]).is_ok());
        let w = Wrap::try_parse_from(["x", "--transcript", "/t.jsonl", "--json"]);
        assert!(w.is_ok_and(|w| w.context.json && w.context.feed_max_age.is_none()));
        let w = Wrap::try_parse_from(["x", "--session", "a", "--feed-max-age", "90"]);
        assert!(w.is_ok_and(|w| w.context.feed_max_age == Some(Duration::from_secs(90))));
    }
}
