//! The `wakebridge statusline` and `wakebridge context` verbs: thin I/O shells over
//! `context::statusline`, `follow` and `figures`, every default from the configuration `serve`
//! uses (a flag overrides it); `statusline --wrap` runs the user's own status-line command too.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use crate::agent::Agent;
use crate::claude::home::CONFIG_DIR_ENV;
use crate::claude::home::find_transcript_in;
use crate::cli::statusline::parse_statusline;
use crate::config::{Config, ConfigError};
use crate::context::follow::{PollEvent, TranscriptFollower};
use crate::context::statusline::{
    UNKNOWN_LINE, WRAPPED_BUDGET, marker_activity, read_bounded, read_feed, render_line,
    wrapped_line, write_feed,
};
use crate::context::window::WindowResolver;
use crate::context::{ContextReport, figures};
use crate::deadline::Deadline;
use crate::mux::process::{self, Invocation, MuxError};
use crate::wire::session_id::SessionId;

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

/// Always prints a line and exits 0: a failing statusLine command would only blank Claude Code's
/// status bar.
pub fn run_statusline(args: &StatuslineArgs, config: Result<Config, ConfigError>) -> ExitCode {
    let deadline = Deadline::after(WRAPPED_BUDGET);
    let stdin = std::io::stdin();
    // Run by hand on a terminal there is no payload; do not wait for one.
    let input = match stdin.is_terminal() {
        true => Vec::new(),
        false => read_bounded(stdin.lock()),
    };
    // The user's command runs on the same input while our line is worked out; past the budget
    // its process group is killed.
    let wrapped = args.wrap.as_ref().map(|command| {
        let inv = Invocation::new(Path::new("sh"), "the wrapped command")
            .args(["-c", command])
            .input(input.clone());
        let budget = deadline.remaining();
        std::thread::spawn(move || process::run_blocking(&inv, budget))
    });
    let line = our_line(args, config, &input);
    let theirs = match wrapped.map(std::thread::JoinHandle::join) {
        Some(Ok(Ok(done))) => Some(done.stdout),
        Some(Ok(Err(e))) => {
            let alone = matches!(e, MuxError::Timeout { .. })
                .then_some("; showing wakebridge's line alone")
                .unwrap_or_default();
            crate::errln!("wakebridge statusline: {e}{alone}");
            None
        }
        _ => None,
    };
    let line = wrapped_line(theirs.as_deref().map(str::as_bytes), &line);
    crate::outln!("{line}");
    ExitCode::SUCCESS
}

/// wakebridge's own line for `input`, feeding the daemon on the way.
fn our_line(args: &StatuslineArgs, config: Result<Config, ConfigError>, input: &[u8]) -> String {
    // The status bar shows whatever the line says, so even a bad configuration gets one.
    let config = match config {
        Ok(config) => config,
        Err(e) => {
            crate::errln!("wakebridge statusline: {e}");
            return UNKNOWN_LINE.to_owned();
        }
    };
    let feed = parse_statusline(input, crate::clock::now_s());
    let state_dir = &config.paths.state_dir;
    let written = (feed.as_ref()).map(|f| write_feed(state_dir, f).map_err(|e| e.to_string()));
    let budget = (feed.as_ref().and_then(|f| f.budget.as_ref()))
        .map(|reading| crate::budget::record(state_dir, reading).map_err(|e| e.to_string()));
    for err in [written, budget]
        .into_iter()
        .flatten()
        .filter_map(Result::err)
    {
        // Not shown in the status bar; it helps whoever runs the command by hand.
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

/// Exit 1 when the transcript cannot be found or read, 2 for arguments that cannot work.
pub fn run_context(args: &ContextArgs, config: &Config) -> ExitCode {
    match context(args, config) {
        Ok(text) => {
            crate::outln!("{text}");
            ExitCode::SUCCESS
        }
        Err((code, message)) => {
            if !message.is_empty() {
                crate::errln!("wakebridge context: {message}");
            }
            ExitCode::from(code)
        }
    }
}

fn context(args: &ContextArgs, config: &Config) -> Result<String, (u8, String)> {
    let settings = &config.settings.context;
    let default_window = args.default_window.unwrap_or(settings.default_window);
    let feed_max_age = args.feed_max_age.unwrap_or(settings.feed_max_age);
    let models = settings.models.iter().map(|(k, v)| (k.as_str(), *v));
    let resolver = WindowResolver::new(models, default_window).map_err(|e| (2, e.to_string()))?;
    if let Some(sid) = &args.session
        && !SessionId::is_valid(sid)
    {
        let why = format!("session id {sid:?} is not valid; expected letters, digits, '-' or '_'");
        return Err((2, why));
    }
    let homes: Vec<_> = config
        .paths
        .claude
        .iter()
        .map(|home| home.dir.clone())
        .collect();
    // A prefix (as `status` shows ids) names its session through the daemon; a full id, or one
    // whose transcript is here, needs no daemon (and a full id no scan of the transcripts here).
    let session_id = match &args.session {
        Some(sid)
            if !crate::cli::prefix::is_full_id(sid)
                && find_transcript_in(&homes, sid, None).is_none() =>
        {
            let daemon = crate::cli::client::Daemon::new(config, "context", args.url.as_deref());
            Some(daemon.resolve(sid).ok_or((2, String::new()))?)
        }
        Some(sid) => Some(sid.clone()),
        None => args
            .transcript
            .as_deref()
            .and_then(Path::file_stem)
            .and_then(|s| s.to_str())
            .filter(|s| SessionId::is_valid(s))
            .map(str::to_owned),
    };
    let feed = session_id
        .as_deref()
        .and_then(|sid| read_feed(&config.paths.state_dir, sid, feed_max_age));
    let hint = feed.as_ref().and_then(|f| f.transcript_path.as_deref());
    let transcript = match (&args.transcript, &session_id) {
        (Some(path), _) => Some(path.clone()),
        (None, Some(sid)) => find_transcript_in(&homes, sid, hint),
        (None, None) => None,
    };
    let reading = match &transcript {
        Some(path) => {
            let mut follower = TranscriptFollower::new(path, Agent::Claude);
            if follower.poll().map_err(|e| (1, e.to_string()))?.event == PollEvent::Missing {
                let path = path.display();
                let why = "Claude Code creates it at the first prompt";
                return Err((1, format!("transcript {path} does not exist ({why})")));
            }
            follower.current().cloned()
        }
        None if feed.is_some() => None,
        None => {
            let sid = session_id.unwrap_or_default();
            let why = format!("pass --transcript PATH or check {CONFIG_DIR_ENV}");
            return Err((1, format!("no transcript found for session {sid:?}; {why}")));
        }
    };
    let figures = figures(reading.as_ref(), feed.as_ref(), &resolver);
    let r = ContextReport {
        session_id,
        transcript,
        figures,
    };
    if args.json {
        return Ok(serde_json::to_string(&r).unwrap_or_default());
    }
    let f = &r.figures;
    let model = f.model.as_deref().unwrap_or("unknown model");
    let source: &str = f.window_source.into();
    let (window, usage) = (f.context_window, f.usage_source.map_or("?", Into::into));
    Ok(match (f.used_tokens, f.percent) {
        (Some(used), Some(pct)) => format!(
            "{pct:.1}% of the context window in use: {used} of {window} tokens ({model}; window from {source}, usage from {usage})"
        ),
        _ => {
            format!("no context usage recorded yet ({model}; window {window} tokens from {source})")
        }
    })
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
