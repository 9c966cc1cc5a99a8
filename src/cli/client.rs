//! The verbs that talk to a running daemon over HTTP (`wake`, `rewind`, `status`, `forget`):
//! where it listens, the bearer secret, typed id prefixes, `status`'s terminal, and answers
//! turned into exit codes and text. The glance itself is `glance.rs`'s.

use std::io::{IsTerminal, Write as _};
use std::process::ExitCode;
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::api::Sessions;
use crate::cli::glance::{self, View};
use crate::cli::prefix;
use crate::config::Config;

#[derive(Debug, clap::Args)]
pub struct WakeArgs {
    /// The session to wake: its bus session id, or any unique prefix of it (as `status` shows).
    session_id: String,
    /// Skip the busy marker and the cooldown (never the pane mapping, the stale-pane guard, or
    /// the check for text already at the prompt).
    #[arg(long)]
    force: bool,
    /// Type this configured message ([wake.messages]) instead of the wake prompt.
    #[arg(long, value_name = "NAME")]
    message: Option<String>,
    #[command(flatten)]
    machine: MachineArg,
    #[command(flatten)]
    url: UrlArg,
}

#[derive(Debug, clap::Args)]
pub struct RewindArgs {
    /// The session to rewind, or any unique prefix of its id [default:
    /// $AGENT_EVENT_BUS_SESSION_ID, then $CLAUDE_CODE_SESSION_ID, as inside the session]
    #[arg(long = "session", alias = "session-id", value_name = "ID")]
    session_id: Option<String>,
    /// Start the agent again in its pane (first-run screens passed, the re-hydration prompt as
    /// its first prompt) instead of `/clear`; revives an agent whose pane or tmux server died
    #[arg(long)]
    restart: bool,
    #[command(flatten)]
    machine: MachineArg,
    #[command(flatten)]
    url: UrlArg,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Print the daemon's /sessions answer (JSON) instead of the table.
    #[arg(long)]
    json: bool,
    /// Include every ended session (SessionEnd seen, or no pane and quiet for a day); by
    /// default an ended session leaves the view an hour after its last activity.
    #[arg(long)]
    all: bool,
    /// Redraw every 2 s until Ctrl-C.
    #[arg(long)]
    watch: bool,
    /// Every machine of the fleet (GET /fleet), with a MACHINE column; `--json` prints it.
    #[arg(long)]
    fleet: bool,
    #[command(flatten)]
    url: UrlArg,
}

#[derive(Debug, clap::Args)]
pub struct ForgetArgs {
    /// The session to forget: its id or any unique prefix of it.
    session_id: String,
    /// Forget it even though panes.json maps it to a pane, and unmap it: for an agent whose pane
    /// died without its SessionEnd hook.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    url: UrlArg,
}

#[derive(Debug, clap::Args)]
pub struct PauseArgs {
    /// The sessions to pause: ids or unique prefixes of them (as `status` shows).
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    sessions: Vec<String>,
    /// Every session, those that start later too.
    #[arg(long)]
    all: bool,
    /// Lift the pause by itself after this long (`90m`, `2h`, `1d`) [default: until unpaused]
    #[arg(long = "for", value_name = "DURATION", value_parser = crate::config::duration::parse)]
    for_: Option<std::time::Duration>,
    #[command(flatten)]
    machine: MachineArg,
    #[command(flatten)]
    url: UrlArg,
}

#[derive(Debug, clap::Args)]
pub struct UnpauseArgs {
    /// The sessions to unpause: ids or unique prefixes of them.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    sessions: Vec<String>,
    /// Lift every pause, the one of all sessions included.
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    machine: MachineArg,
    #[command(flatten)]
    url: UrlArg,
}

#[derive(Debug, clap::Args)]
pub struct MachineArg {
    /// Another machine of the fleet (`status --fleet` names them): the local daemon sends the
    /// verb there through the bus, signed, and prints that machine's answer
    #[arg(long, value_name = "NAME")]
    machine: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct UrlArg {
    /// The daemon's base URL [default: from the configuration, e.g. http://127.0.0.1:8082]
    #[arg(long)]
    pub url: Option<String>,
}

/// How often `status --watch` redraws; each redraw costs the daemon a read of every spool.
const WATCH_EVERY: Duration = Duration::from_secs(2);
/// Narrowest layout `status` attempts; below it the lines are cut rather than squeezed.
const MIN_WIDTH: usize = 40;
const CLEAR_SCREEN: &str = "\x1b[H\x1b[2J";
/// How long a CLI call may wait for the daemon (a wake takes at most ~3.6 s).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// `http://<host>:<port>` of the local daemon, from the configuration `serve` would use.
pub(crate) fn daemon_url(config: &Config, explicit: Option<&str>) -> String {
    if let Some(url) = explicit {
        return url.trim_end_matches('/').to_string();
    }
    let ip = Some(config.topology.bind).filter(|ip| !ip.is_unspecified());
    let ip = ip.unwrap_or(std::net::Ipv4Addr::LOCALHOST.into());
    format!("http://{}", std::net::SocketAddr::new(ip, config.port))
}

#[derive(Debug, thiserror::Error)]
pub(super) enum CallError {
    #[error(transparent)]
    Runtime(std::io::Error),
    #[error(transparent)]
    Client(reqwest::Error),
    #[error(
        "cannot reach the wakebridge daemon at {url}: {source}; is `wakebridge serve` running? \
         (--url to point elsewhere)"
    )]
    Unreachable { url: String, source: reqwest::Error },
}

/// A call's HTTP status and JSON answer (`null` when it is none), or why there is none.
type Answer = Result<(u16, Value), CallError>;

/// The daemon one verb talks to; `verb` says what went wrong (`wakebridge <verb>: ...`).
/// With `machine`, the verb is for that machine of the fleet: the daemon sends it there.
pub(crate) struct Daemon<'a> {
    config: &'a Config,
    pub base: String,
    verb: &'static str,
    machine: Option<String>,
}

impl<'a> Daemon<'a> {
    pub fn new(config: &'a Config, verb: &'static str, url: Option<&str>) -> Daemon<'a> {
        let base = daemon_url(config, url);
        Daemon {
            config,
            base,
            verb,
            machine: None,
        }
    }

    /// The same daemon, its verbs meant for `machine` of the fleet.
    fn on(self, machine: &MachineArg) -> Daemon<'a> {
        Daemon {
            machine: machine.machine.clone(),
            ..self
        }
    }

    async fn request(&self, method: Method, route: &str, body: Option<Value>) -> Answer {
        let client = crate::http_client(CALL_TIMEOUT);
        let url = format!("{}{route}", self.base);
        let mut request = client.map_err(CallError::Client)?.request(method, &url);
        if let Some(secret) = &self.config.secret {
            request = request.bearer_auth(secret.expose());
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let unreachable = |source| CallError::Unreachable { url, source };
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status().as_u16();
        Ok((status, response.json().await.unwrap_or(Value::Null)))
    }

    pub(super) fn get(&self, route: &str) -> Answer {
        super::block_on(self.request(Method::GET, route, None)).map_err(CallError::Runtime)?
    }

    /// A 200 answer, else `None` once the reason is printed (the caller exits 2). A verb for
    /// another machine goes through `/fleet/send`, and that machine's answer is the answer.
    fn call(&self, method: Method, route: &str, body: Option<Value>) -> Option<Value> {
        let remote = self.machine.as_ref().filter(|_| method == Method::POST);
        let (route, body) = match remote {
            Some(machine) => {
                let verb = route.trim_start_matches('/');
                let sent = json!({"machine": machine, "verb": verb, "args": body});
                ("/fleet/send", Some(sent))
            }
            None => (route, body),
        };
        let got = super::block_on(self.request(method, route, body));
        let got = got.map_err(CallError::Runtime).and_then(|got| got);
        let answer = answer(got).map_err(|e| self.say(e)).ok()?;
        let Some(machine) = remote else {
            return Some(answer);
        };
        let theirs = Ok((
            answer["status"].as_u64().unwrap_or(0) as u16,
            answer["answer"].clone(),
        ));
        self::answer(theirs)
            .map_err(|e| self.say(format!("{machine} answered {e}")))
            .ok()
    }

    fn say(&self, what: impl std::fmt::Display) {
        crate::errln!("wakebridge {}: {what}", self.verb);
    }

    /// The one place a typed session id is resolved; `None` once the reason is said.
    pub fn resolve(&self, given: &str) -> Option<String> {
        if prefix::is_full_id(given) {
            return Some(given.to_owned());
        }
        self.resolve_among(given, &self.known()?)
    }

    fn resolve_among(&self, given: &str, known: &[String]) -> Option<String> {
        let known: Vec<&str> = known.iter().map(String::as_str).collect();
        prefix::resolve(given, &known).map_err(|e| self.say(e)).ok()
    }

    /// Every id the daemon knows a session by (former ones too), or the one the fleet view
    /// shows of `machine`; `None` once the reason is said.
    fn known(&self) -> Option<Vec<String>> {
        if let Some(machine) = &self.machine {
            let fleet = self.call(Method::GET, "/fleet", None)?;
            return crate::cli::fleet::session_ids(&fleet, machine)
                .map_err(|e| self.say(e))
                .ok();
        }
        let answer = self.call(Method::GET, "/sessions", None)?;
        let sessions = listed(answer).map_err(|e| self.say(e)).ok()?;
        let known = glance::known_ids(&sessions.sessions).into_iter();
        Some(known.map(str::to_owned).collect())
    }

    /// POSTs `body` with `given`'s id: the id and the 200 answer; `None` once the reason is said.
    fn post(&self, given: Option<&str>, route: &str, mut body: Value) -> Option<(String, Value)> {
        let session_id = match given {
            Some(given) => self.resolve(given)?,
            None => body["session_id"].as_str()?.to_owned(),
        };
        body["session_id"] = json!(session_id);
        Some((session_id, self.call(Method::POST, route, Some(body))?))
    }
}

fn answer(got: Answer) -> Result<Value, String> {
    match got.map_err(|e| e.to_string())? {
        (200, answer) => Ok(answer),
        (status, answer) => {
            let error = answer["error"].as_str().unwrap_or("unexpected answer");
            Err(format!("{status}: {error}"))
        }
    }
}

pub fn wake(config: &Config, args: &WakeArgs) -> ExitCode {
    let daemon = Daemon::new(config, "wake", args.url.url.as_deref()).on(&args.machine);
    let mut body = json!({"force": args.force});
    if let Some(name) = &args.message {
        body["message"] = json!(name);
    }
    let Some((session_id, answer)) = daemon.post(Some(&args.session_id), "/wake", body) else {
        return ExitCode::from(2);
    };
    let action = answer["action"].as_str().unwrap_or("?");
    crate::outln!("{session_id}: {action}");
    if action == "spool-paused" {
        daemon.say(format!(
            "{session_id} is paused; `wakebridge unpause {session_id}` lets wakes through"
        ));
    }
    ExitCode::from(u8::from(!matches!(action, "tmux" | "zellij" | "inbox")))
}

pub fn rewind(config: &Config, args: &RewindArgs) -> ExitCode {
    let daemon = Daemon::new(config, "rewind", args.url.url.as_deref()).on(&args.machine);
    // Only an id the user typed is a prefix; the session's own id (the environment) is whole.
    let typed = args.session_id.as_deref().filter(|id| !id.is_empty());
    // Inside a session, its own id; another machine's session is always named.
    let own = (args.machine.machine.is_none())
        .then(|| crate::cli::session::resolve_session_id(None, &crate::env::Env::process()))
        .flatten();
    if typed.is_none() && own.is_none() {
        daemon.say(
            "no session id: pass --session, or run it inside the session \
             (AGENT_EVENT_BUS_SESSION_ID or CLAUDE_CODE_SESSION_ID)",
        );
        return ExitCode::from(2);
    }
    let body = json!({"session_id": own, "restart": args.restart});
    let Some((session_id, answer)) = daemon.post(typed, "/rewind", body) else {
        return ExitCode::from(2);
    };
    let current = answer["session_id"].as_str().unwrap_or(&session_id);
    match answer["status"].as_str() {
        Some("already-asked") => crate::outln!("{current}: a rewind is already waiting"),
        _ if args.restart => crate::outln!(
            "{current}: restart asked for; at its next idle moment the agent is started again in its pane"
        ),
        _ => crate::outln!(
            "{current}: rewind asked for; at its next idle moment: /clear, then the re-hydration prompt"
        ),
    }
    ExitCode::SUCCESS
}

pub fn forget(config: &Config, args: &ForgetArgs) -> ExitCode {
    let daemon = Daemon::new(config, "forget", args.url.url.as_deref());
    let body = json!({"force": args.force});
    let Some((session_id, answer)) = daemon.post(Some(&args.session_id), "/forget", body) else {
        return ExitCode::from(2);
    };
    let unmapped = (answer["unmapped"] == true).then_some(", and unmapped from panes.json");
    crate::outln!("{session_id}: forgotten{}", unmapped.unwrap_or_default());
    ExitCode::SUCCESS
}

/// `wakebridge pause`: nothing reaches the sessions (or all of them) until unpaused or the time
/// given runs out; their bus events wait, owed.
pub fn pause(config: &Config, args: &PauseArgs) -> ExitCode {
    let daemon = Daemon::new(config, "pause", args.url.url.as_deref()).on(&args.machine);
    let Some((mut body, unknown)) = switch_body(&daemon, &args.sessions, args.all) else {
        return ExitCode::from(2);
    };
    if let Some(for_) = args.for_ {
        body["for_s"] = json!(for_.as_secs_f64());
    }
    let Some(answer) = daemon.call(Method::POST, "/pause", Some(body)) else {
        return ExitCode::from(1);
    };
    let until = answer["until"]
        .as_str()
        .map_or(String::new(), |at| format!(" until {at}"));
    crate::outln!("{}: paused{until}", shown(&ids(&answer["session_ids"])));
    if !unknown.is_empty() {
        crate::outln!(
            "no session is known as {} yet: paused for when one comes (`--all` pauses every session)",
            unknown.join(", ")
        );
    }
    ExitCode::SUCCESS
}

/// `wakebridge unpause`: what waited is paid at once.
pub fn unpause(config: &Config, args: &UnpauseArgs) -> ExitCode {
    let daemon = Daemon::new(config, "unpause", args.url.url.as_deref()).on(&args.machine);
    let Some((body, _)) = switch_body(&daemon, &args.sessions, args.all) else {
        return ExitCode::from(2);
    };
    let Some(answer) = daemon.call(Method::POST, "/unpause", Some(body)) else {
        return ExitCode::from(1);
    };
    let not_paused = ids(&answer["not_paused"]);
    let lifted: Vec<&str> = (ids(&answer["session_ids"]).into_iter())
        .filter(|id| !not_paused.contains(id))
        .collect();
    if !lifted.is_empty() {
        crate::outln!("{}: unpaused", shown(&lifted));
    }
    if !not_paused.is_empty() {
        crate::outln!("{}: had no pause of its own to lift", not_paused.join(", "));
    }
    if answer["all_still_paused"] == true {
        crate::outln!("every session is still paused: `wakebridge unpause --all` lifts that");
    }
    ExitCode::SUCCESS
}

/// The body `/pause` and `/unpause` take (every typed prefix resolved, or `all`), and the ids
/// it names that no session the daemon knows has: a bus name still to come, or a slip.
fn switch_body(daemon: &Daemon, sessions: &[String], all: bool) -> Option<(Value, Vec<String>)> {
    if all {
        return Some((json!({"all": true}), Vec::new()));
    }
    let known = daemon.known()?;
    let ids: Vec<String> = (sessions.iter())
        .map(|given| daemon.resolve_among(given, &known))
        .collect::<Option<_>>()?;
    let unknown = ids.iter().filter(|id| !known.contains(id)).cloned();
    Some((json!({"session_ids": ids}), unknown.collect()))
}

/// The ids in an answer's list.
fn ids(list: &Value) -> Vec<&str> {
    (list.as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect()
}

/// Sessions for a person: `every session` for the pause of all.
fn shown(ids: &[&str]) -> String {
    match ids {
        [crate::store::ALL_SESSIONS] => "every session".into(),
        ids => ids.join(", "),
    }
}

pub fn status(config: &Config, args: &StatusArgs) -> ExitCode {
    let daemon = Daemon::new(config, "status", args.url.url.as_deref());
    let terminal = std::io::stdout().is_terminal();
    let shown = super::block_on(async {
        if !args.watch {
            let text = frame(&daemon, args, terminal).await?;
            crate::outln!("{}", text.trim_end_matches('\n'));
            return Ok(());
        }
        let redraw = async {
            loop {
                let text = frame(&daemon, args, terminal).await;
                let text = text.unwrap_or_else(|message| format!("wakebridge status: {message}\n"));
                // On a terminal each frame replaces the last; into a pipe, frames follow each
                // other with a blank line between.
                let text = match terminal {
                    true => format!("{CLEAR_SCREEN}{text}"),
                    false => format!("{text}\n"),
                };
                let mut out = std::io::stdout().lock();
                let written = out.write_all(text.as_bytes()).and_then(|()| out.flush());
                drop(out);
                if written.is_err() {
                    return; // Nobody reads any more (a closed pipe): done.
                }
                tokio::time::sleep(WATCH_EVERY).await;
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = redraw => {}
        }
        Ok(())
    });
    match shown.map_err(|e| e.to_string()).and_then(|shown| shown) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            daemon.say(message);
            ExitCode::from(2)
        }
    }
}

/// One screenful: the /sessions answer as JSON, or the glance with the /health header.
async fn frame(daemon: &Daemon<'_>, args: &StatusArgs, terminal: bool) -> Result<String, String> {
    if args.fleet {
        let fleet = answer(daemon.request(Method::GET, "/fleet", None).await)?;
        if args.json {
            return Ok(format!("{fleet:#}\n"));
        }
        let fleet: crate::api::Fleet = serde_json::from_value(fleet).map_err(|error| {
            format!("the daemon's /fleet answer does not read as this wakebridge's ({error})")
        })?;
        return Ok(super::fleet::render(&fleet, &glance_view(args, terminal)));
    }
    let sessions = answer(daemon.request(Method::GET, "/sessions", None).await)?;
    if args.json {
        return Ok(format!("{sessions:#}\n"));
    }
    let listed = listed(sessions)?;
    let health = answer(daemon.request(Method::GET, "/health", None).await);
    let health = health.ok().and_then(|h| serde_json::from_value(h).ok());
    Ok(glance::render(
        &listed,
        health.as_ref(),
        &glance_view(args, terminal),
    ))
}

fn glance_view(args: &StatusArgs, terminal: bool) -> View {
    let columns = terminal
        .then(|| terminal_size::terminal_size_of(std::io::stdout()))
        .flatten()
        .map(|(terminal_size::Width(w), _)| usize::from(w).max(MIN_WIDTH));
    View {
        now: jiff::Timestamp::now(),
        width: columns.unwrap_or(glance::DEFAULT_WIDTH),
        all: args.all,
        color: terminal,
        tz: jiff::tz::TimeZone::system(),
    }
}

/// A `/sessions` answer as the view this build knows, else why it does not read as one.
fn listed(answer: Value) -> Result<Sessions, String> {
    serde_json::from_value(answer).map_err(|error| {
        format!(
            "the daemon's /sessions answer does not read as this wakebridge's ({error}); is the \
             running daemon another version? `wakebridge service status` says which"
        )
    })
}
