//! `wakebridge doctor`: every link a wake needs, in the order a wake uses them, one line each
//! with the fix when it is broken, then one line per session on its inbox. Exit 0 only when no
//! link failed. Each check is a plain function over what was read; only [`examine`] reads.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

mod codex;
mod inbox;

use inbox::{InboxFacts, inbox_check, started_in_bypass, transcript_head};

use super::client::Daemon;
use crate::api::{Health, SessionState, SessionStatus, Sessions};
use crate::claude::home::ClaudeHome;
use crate::claude::hooks::WIRED_EVENTS;
use crate::claude::registry;
use crate::claude::settings::{self, SETTINGS_FILE, Wired};
use crate::config::{Backend, Config};
use crate::deadline::Deadline;
use crate::env::Env;
use crate::mux::process::{self, Invocation};
use crate::mux::{Injector, MuxConfig, PaneState, preflight_for, resolves};
use crate::wakedir::PANES_FILE;
use crate::wakedir::reader::mapped_panes;
use crate::wakedir::target::PaneTarget;

/// Budget for each mapped pane's check: a hung multiplexer must not hang the doctor.
const PANE_CHECK_BUDGET: Duration = Duration::from_secs(3);
/// How old this machine's last status on the bus may be: it goes every 10 minutes.
const STATUS_WITHIN: i64 = 11 * 60;
/// How old the daemon's last sight of its webhook row may be: it looks every minute.
const VERIFIED_WITHIN: u64 = 180;
/// How long `claude --version` may take (a cold npm start is ~1 s).
const VERSION_BUDGET: Duration = Duration::from_secs(10);
const RESTART_DAEMON: &str =
    "restart the daemon so it runs this version (wakebridge service install)";
/// How a link stands: `Warn` deserves a look, `Fail` stops a wake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
pub enum Verdict {
    #[strum(serialize = "ok  ")]
    Ok,
    #[strum(serialize = "warn")]
    Warn,
    #[strum(serialize = "FAIL")]
    Fail,
}

/// One printed line: the link, what was found, and the fix when it is not OK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub link: &'static str,
    pub verdict: Verdict,
    pub found: String,
    pub fix: Option<String>,
}

impl Check {
    fn ok(link: &'static str, found: impl Into<String>) -> Check {
        Check {
            link,
            verdict: Verdict::Ok,
            found: found.into(),
            fix: None,
        }
    }

    fn warn(link: &'static str, found: impl Into<String>, fix: &str) -> Check {
        Check {
            verdict: Verdict::Warn,
            fix: Some(fix.into()),
            ..Check::ok(link, found)
        }
    }

    fn fail(link: &'static str, found: impl Into<String>, fix: &str) -> Check {
        Check {
            verdict: Verdict::Fail,
            ..Check::warn(link, found, fix)
        }
    }
}

pub fn run(config: &Config, url: Option<&str>) -> ExitCode {
    let checks = examine(config, &Env::process(), url);
    for check in &checks {
        let tag: &str = check.verdict.into();
        crate::outln!("{tag}  {:<12} {}", check.link, check.found);
        if let Some(fix) = &check.fix {
            crate::outln!("      {:<12} fix: {fix}", "");
        }
    }
    let failed = checks.iter().filter(|c| c.verdict == Verdict::Fail).count();
    if failed == 0 {
        crate::outln!("a wake would work");
        return ExitCode::SUCCESS;
    }
    crate::outln!("a wake would not work: {failed} link(s) to fix, first one first");
    ExitCode::FAILURE
}

fn examine(config: &Config, env: &Env, url: Option<&str>) -> Vec<Check> {
    let mut checks = Vec::new();
    let home = config.paths.claude.as_ref();
    // Who may message a session; unreadable settings already failed the hooks line.
    let mut inbound = None;
    match home {
        Ok(home) => {
            let file = home.dir.join(SETTINGS_FILE);
            let wired = match std::fs::read(&file) {
                Ok(bytes) => settings::wired(&bytes).map(Some).map_err(|e| e.to_string()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(format!("cannot read it: {e}")),
            };
            let wired = wired.map_err(|e| format!("{}: {e}", file.display()));
            checks.push(hooks_check(&file, &wired));
            // No settings to read: nothing more to say, the hooks line failed.
            if let Ok(Some(wired)) = &wired {
                inbound = wired.inbound.clone();
                checks.extend(binary_check(wired, env));
            }
        }
        Err(e) => checks.push(Check::fail(
            "hooks",
            format!("Claude Code's config dir is unknown: {e}"),
            "set HOME (or CLAUDE_CONFIG_DIR) as Claude Code sees it",
        )),
    }
    let daemon = Daemon::new(config, "doctor", url);
    let base = &daemon.base;
    let health = match daemon.get("/health") {
        Ok((200, body)) => serde_json::from_value::<Health>(body).map_err(|e| {
            let found = format!("{base}/health does not read as this wakebridge's ({e})");
            Check::fail("daemon", found, RESTART_DAEMON)
        }),
        Ok((status, body)) => Err(Check::fail(
            "daemon",
            format!("{base}/health answered {status}: {body}"),
            "is something else listening on that port? see `wakebridge config`",
        )),
        Err(e) => Err(Check::fail(
            "daemon",
            format!("not answering at {base} ({})", root_cause(&e)),
            "wakebridge service install (or run `wakebridge serve`)",
        )),
    };
    let health = health.map_err(|failed| checks.push(failed)).ok();
    if let Some(health) = &health {
        checks.push(daemon_check(health, config));
        let bus_url = health.bus_url.as_deref().unwrap_or(&config.bus_url);
        checks.push(bus_check(health, jiff::Timestamp::now(), bus_url));
    }
    checks.extend(fleet_check(config, health.as_ref(), jiff::Timestamp::now()));
    // The daemon's backend is the one that counts; this shell's when the daemon is not up.
    let backend = health
        .as_ref()
        .and_then(|h| h.backend.as_deref()?.parse().ok());
    if backend.unwrap_or(config.backend) == Backend::Spool {
        checks.push(Check::fail(
            "backend",
            "spool: events are only appended, nothing is ever typed into a pane",
            "run the daemon with --backend mux (the default)",
        ));
    }
    let mapped = mapped_panes(&config.paths.wake_dir);
    let panes_file = config.paths.wake_dir.join(PANES_FILE);
    let sessions = match daemon.get("/sessions") {
        Ok((200, sessions)) => serde_json::from_value::<Sessions>(sessions).ok(),
        _ => None,
    };
    let listed = sessions.as_ref().map_or(&[][..], |s| &s.sessions);
    let inboxed = (listed.iter())
        .filter(|s| s.pane.is_none() && s.inbox.as_ref().is_some_and(|i| i.live))
        .count();
    checks.push(reach_check(&panes_file, mapped.len(), inboxed));
    if !mapped.is_empty() {
        let mux = MuxConfig::from_settings(&config.settings.mux);
        checks.extend(pane_checks(&mux, &mapped));
        let daemon_env = health.as_ref().and_then(|h| process_env(h.pid));
        checks.push(multiplexer_check(&mux, &mapped, env, daemon_env.as_ref()));
    }
    if let Ok(home) = home {
        checks.push(claude_check(config, home, env));
    }
    checks.extend(codex::codex_check(env));
    if let Some(sessions) = sessions {
        let current = (sessions.sessions.iter()).filter(|s| s.state != SessionState::Ended);
        for session in current {
            let sid = &session.session_id;
            let announced = home
                .ok()
                .and_then(|h| registry::announced(&h.sessions(), sid));
            let transcript = session.transcript_path.as_deref().map(Path::new);
            let head = transcript.and_then(transcript_head);
            let bypass = head.as_deref().and_then(started_in_bypass);
            let facts = InboxFacts { announced, bypass };
            checks.push(inbox_check(session, &facts, inbound.as_ref()));
        }
        checks.extend(waiting_checks(&sessions.sessions));
    }
    checks
}

/// The innermost cause of an error: "Connection refused (os error 111)" rather than the
/// wrappers' "error sending request for url".
fn root_cause(error: &dyn std::error::Error) -> String {
    let causes = std::iter::successors(Some(error), |e| e.source());
    causes.last().map(ToString::to_string).unwrap_or_default()
}

/// `Ok(None)`: there is no settings file.
fn hooks_check(file: &Path, wired: &Result<Option<Wired>, String>) -> Check {
    const FIX: &str = "wakebridge claude install";
    let wired = match wired {
        Ok(Some(wired)) => wired,
        Ok(None) => return Check::fail("hooks", format!("{} does not exist", file.display()), FIX),
        Err(e) => return Check::fail("hooks", e, "fix the file, then wakebridge claude install"),
    };
    let events = WIRED_EVENTS.iter().map(|(event, _)| *event);
    let missing: Vec<&str> = events.filter(|e| !wired.hooks.contains_key(*e)).collect();
    let file = file.display();
    if !missing.is_empty() {
        let missing = missing.join(", ");
        return Check::fail("hooks", format!("{missing} not wired in {file}"), FIX);
    }
    let found = format!("all {} events wired in {file}", WIRED_EVENTS.len());
    if wired.statusline {
        return Check::ok("hooks", format!("{found}, and the status line"));
    }
    Check::warn(
        "hooks",
        format!("{found}; the status line is not wakebridge's"),
        "wakebridge claude install (it wraps a status line you already have)",
    )
}

/// Each wired hook's program starts from this shell's PATH (Claude Code runs hooks with the PATH
/// it was started with).
fn binary_check(wired: &Wired, env: &Env) -> Option<Check> {
    let path = env.get("PATH").unwrap_or_default();
    let mut programs: Vec<&str> = wired.hooks.values().map(String::as_str).collect();
    programs.sort_unstable();
    programs.dedup();
    let starts = |program: &&str| resolves(Path::new(program), OsStr::new(&path));
    let broken = programs.iter().find(|p| !starts(p));
    Some(match broken {
        None if programs.is_empty() => return None,
        None => Check::ok("binary", programs.join(", ")),
        Some(program) => Check::fail(
            "binary",
            format!("the hooks run {program}, which does not start from this PATH"),
            "wakebridge claude install (it writes the absolute path of the binary you run it with)",
        ),
    })
}

fn daemon_check(health: &Health, config: &Config) -> Check {
    let file = |f: Option<&Path>| f.map_or("no config file".into(), |f| f.display().to_string());
    let config_file = health.config_file.value().map(PathBuf::as_path);
    let (pid, version) = (health.pid, &health.version);
    let found = format!("pid {pid}, version {version}, {}", file(config_file));
    let ours = env!("CARGO_PKG_VERSION");
    let shells = config.paths.config_file.as_deref();
    if *version != ours {
        Check::warn(
            "daemon",
            format!("{found}; this binary is {ours}"),
            RESTART_DAEMON,
        )
    } else if config_file != shells {
        Check::warn(
            "daemon",
            format!("{found}; this shell resolves {}", file(shells)),
            "start the daemon with the same --config (or XDG_CONFIG_HOME) as your shell",
        )
    } else {
        Check::ok("daemon", found)
    }
}

fn bus_check(health: &Health, now: jiff::Timestamp, bus_url: &str) -> Check {
    let Some(registered) = health.registered else {
        return Check::warn(
            "bus",
            "registration is off ([registration] enabled = false)",
            "register the hook URL with the bus yourself, or turn registration on",
        );
    };
    if !registered {
        return Check::fail(
            "bus",
            format!("not registered with the bus at {bus_url}"),
            "start the bus (agent-event-bus), check --bus-url; the daemon retries by itself",
        );
    }
    let verified = health.last_verified_at.value();
    let age = verified.and_then(|at| u64::try_from(now.as_second() - at.as_second()).ok());
    let webhook = health.webhook_id.value();
    let webhook = webhook.map_or("unknown".into(), ToString::to_string);
    match age.filter(|age| *age <= VERIFIED_WITHIN) {
        Some(age) => Check::ok(
            "bus",
            format!("registered (webhook {webhook}), verified {age}s ago"),
        ),
        None => Check::warn(
            "bus",
            "registered, but not verified in the last 3 minutes",
            "is the bus hung? see the daemon's log",
        ),
    }
}

/// With `[fleet] key_file`: the key as this shell reads it (only you may read it), and this
/// machine on the bus as the daemon tells it. A warning at most: the fleet is no link of a wake.
fn fleet_check(config: &Config, health: Option<&Health>, now: jiff::Timestamp) -> Option<Check> {
    let settings = &config.settings.fleet;
    if settings.key_file.is_empty() {
        return None;
    }
    let fix_key = "[fleet] key_file: the fleet's shared key, in a file only you can read";
    let fleet = match crate::fleet::FleetConfig::from_settings(settings, config.secret.as_ref()) {
        Ok(fleet) => fleet?,
        Err(e) => return Some(Check::warn("fleet", e.to_string(), fix_key)),
    };
    let found = format!("machine {}, its key only yours", fleet.machine);
    let Some(theirs) = health.and_then(|h| h.fleet.as_ref()) else {
        let fix = "restart the daemon so it reads [fleet] (`wakebridge service install` again)";
        return Some(Check::warn(
            "fleet",
            format!("{found}; the daemon is in no fleet"),
            fix,
        ));
    };
    let mut troubles = Vec::new();
    if !theirs.on_bus {
        troubles.push("its last heartbeat on the bus went unanswered".to_owned());
    }
    if theirs.webhook == Some(false) {
        troubles.push("its fleet webhook is not on the bus (commands wait for a catch-up)".into());
    }
    let age = (theirs.published_at).map(|at| now.as_second().saturating_sub(at.as_second()));
    match age {
        None => troubles.push("no status published yet".into()),
        Some(age) if age > STATUS_WITHIN => {
            troubles.push(format!("its status last went out {age}s ago"));
        }
        Some(_) => {}
    }
    let published = age.map_or(String::new(), |age| {
        format!(", status published {age}s ago")
    });
    Some(match troubles.as_slice() {
        [] => Check::ok("fleet", format!("{found}; on the bus{published}")),
        _ => Check::warn(
            "fleet",
            format!("{found}; {}", troubles.join("; ")),
            "is the bus running at the bridge's bus URL? see the daemon's log",
        ),
    })
}

/// Whether any session can be reached: a pane mapped in `panes_file`, or a live inbox (a
/// session in a plain terminal, `inboxed` of them as the daemon sees them).
fn reach_check(panes_file: &Path, mapped: usize, inboxed: usize) -> Check {
    if mapped + inboxed > 0 {
        let found = format!("{mapped} in panes, {inboxed} reached by their inbox alone");
        return Check::ok("reach", found);
    }
    Check::fail(
        "reach",
        format!(
            "no session to reach: none mapped in {} and none with a live inbox",
            panes_file.display()
        ),
        "start Claude Code 2.1.224 or later with the hooks installed (`wakebridge claude install`): its inbox reaches it in any terminal; or in tmux or zellij, or with `wakebridge launch`",
    )
}

/// The guard's verdict on each mapped pane; at least one live pane means a wake can land.
fn pane_checks(mux: &MuxConfig, mapped: &BTreeMap<String, PaneTarget>) -> Vec<Check> {
    let injector = Injector::new(mux);
    let checked = super::block_on(async {
        let mut stale = Vec::new();
        for (sid, target) in mapped {
            let state = injector.check(target, Deadline::after(PANE_CHECK_BUDGET));
            let problem = match state.await {
                Ok(PaneState::Stale(reason)) => reason.to_string(),
                Err(e) => e.to_string(),
                Ok(_) => continue,
            };
            stale.push(Check::warn(
                "panes",
                format!("{} in {target}: {problem}", short(sid)),
                "nothing is typed there; it is unmapped when the session ends (or `wakebridge panes clear`)",
            ));
        }
        stale
    });
    let Ok(mut checks) = checked else {
        let found = "cannot start a runtime to check them";
        return vec![Check::warn("panes", found, "run the doctor again")];
    };
    let (live, all) = (mapped.len() - checks.len(), mapped.len());
    let summary = format!("{live} of {all} mapped pane(s) live with an agent");
    let restart = "start the agent again in tmux (or `wakebridge rewind --restart`)";
    let summary = match live {
        0 => Check::fail("panes", summary, restart),
        _ => Check::ok("panes", summary),
    };
    checks.insert(0, summary);
    checks
}

/// The multiplexers the mapped panes need, found on the daemon's PATH (read from its process
/// where the system allows, else this shell's), and the same tmux server directory.
fn multiplexer_check(
    mux: &MuxConfig,
    mapped: &BTreeMap<String, PaneTarget>,
    env: &Env,
    daemon_env: Option<&Env>,
) -> Check {
    let (seen_by, daemon) = match daemon_env {
        Some(daemon) => ("the daemon's", daemon),
        None => ("this shell's (the daemon's is unreadable)", env),
    };
    let found = preflight_for(mux, daemon);
    let needed: Vec<&str> = ["tmux", "zellij"]
        .into_iter()
        .filter(|name| mapped.values().any(|t| t.mux_name() == *name))
        .collect();
    if let Some(missing) = needed.iter().find(|n| !found.contains(n)) {
        let path = daemon.get("PATH").unwrap_or_default();
        return Check::fail(
            "multiplexer",
            format!("{missing} is not on {seen_by} PATH ({path})"),
            "wakebridge service install (its PATH finds tmux and zellij where you have them)",
        );
    }
    let (theirs, ours) = (daemon.nonempty("TMUX_TMPDIR"), env.nonempty("TMUX_TMPDIR"));
    if daemon_env.is_some() && mux.tmux_socket.is_none() && theirs != ours {
        return Check::fail(
            "multiplexer",
            format!(
                "the daemon's TMUX_TMPDIR is {theirs:?}, this shell's {ours:?}: it talks to another tmux server"
            ),
            "give the daemon the same TMUX_TMPDIR, or set [mux] tmux_socket",
        );
    }
    let needed = needed.join(" and ");
    Check::ok("multiplexer", format!("{needed} on {seen_by} PATH"))
}

/// A process's environment, from `/proc/<pid>/environ` (Linux, same user); `None` elsewhere.
fn process_env(pid: u32) -> Option<Env> {
    let bytes = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let pairs = bytes.split(|b| *b == 0).filter_map(|entry| {
        let (name, value) = std::str::from_utf8(entry).ok()?.split_once('=')?;
        Some((name.to_string(), value.to_string()))
    });
    Some(Env::from_pairs(pairs))
}

/// Claude Code as `[launch] command` names it: its version, and whether its first-run screens
/// were passed (`hasCompletedOnboarding` in the state file it reads).
fn claude_check(config: &Config, home: &ClaudeHome, env: &Env) -> Check {
    let program = config.settings.launch.command.first();
    let program = program.map_or("claude", String::as_str);
    let path = env.get("PATH").unwrap_or_default();
    let inv = Invocation::new(Path::new(program), "claude --version").arg("--version");
    let version = resolves(Path::new(program), OsStr::new(&path))
        .then(|| process::run_blocking(&inv, VERSION_BUDGET).ok())
        .flatten()
        .map(|done| done.stdout.trim().to_owned())
        .filter(|v| !v.is_empty());
    let Some(version) = version else {
        return Check::warn(
            "claude",
            format!("`{program} --version` did not answer from this PATH"),
            "install Claude Code (npm install -g @anthropic-ai/claude-code), or set [launch] command",
        );
    };
    let state = home.state_file_in_use();
    let file = state.display();
    let onboarded = std::fs::read(&state)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .is_some_and(|v| v["hasCompletedOnboarding"] == true);
    if onboarded {
        return Check::ok("claude", format!("{version}, first-run screens passed"));
    }
    Check::warn(
        "claude",
        format!("{version}, first-run screens not passed ({file})"),
        "`wakebridge launch` passes them, or start claude once by hand",
    )
}

/// What waits: owed wakes and sessions held at a usage limit. Never a failure: both resolve
/// by themselves (the turn ends, the limit resets).
fn waiting_checks(sessions: &[SessionStatus]) -> Vec<Check> {
    let owed: u64 = sessions
        .iter()
        .filter_map(|s| Some(s.owed.as_ref()?.events))
        .sum();
    let owing = sessions.iter().filter(|s| s.owed.is_some()).count();
    let limited: Vec<String> = (sessions.iter())
        .filter_map(|s| {
            Some(format!(
                "{} ({})",
                short(&s.session_id),
                s.limit.as_ref()?.shown
            ))
        })
        .collect();
    let owed = match owed {
        0 => "no wake owed".into(),
        _ => format!("{owed} event(s) owed to {owing} session(s), paid when their turns end"),
    };
    let limits = match limited.is_empty() {
        true => "no session at a usage limit".into(),
        false => format!("held until the reset: {}", limited.join(", ")),
    };
    vec![Check::ok("owed", owed), Check::ok("limits", limits)]
}

/// As `status` shows it.
fn short(sid: &str) -> &str {
    sid.get(..8).unwrap_or(sid)
}

#[cfg(test)]
mod tests {
    use super::inbox::*;
    use super::*;
    use crate::api::Shown;
    use crate::claude::registry::Announced;
    use serde_json::{Value, json};

    fn wired(events: &[&str], command: &str) -> Result<Option<Wired>, String> {
        let mut hooks = serde_json::Map::new();
        for event in events {
            hooks.insert(
                (*event).into(),
                json!([{"matcher": "", "hooks": [{"type": "command", "command": command}]}]),
            );
        }
        let bytes = json!({ "hooks": hooks }).to_string();
        Ok(Some(settings::wired(bytes.as_bytes()).unwrap()))
    }

    #[test]
    fn a_live_inbox_reaches_a_session_as_a_pane_does() {
        let file = Path::new("/w/panes.json");
        assert_eq!(reach_check(file, 0, 1).verdict, Verdict::Ok);
        assert_eq!(reach_check(file, 2, 0).verdict, Verdict::Ok);
        let none = reach_check(file, 0, 0);
        assert_eq!(none.verdict, Verdict::Fail);
        assert!(none.fix.unwrap().contains("any terminal"));
    }

    #[test]
    fn hooks_are_wired_only_when_every_event_runs_wakebridge_hook() {
        let all: Vec<&str> = WIRED_EVENTS.iter().map(|(e, _)| *e).collect();
        let file = Path::new("/h/.claude/settings.json");
        let full = hooks_check(file, &wired(&all, "/opt/bin/wakebridge hook"));
        assert_eq!(
            full.verdict,
            Verdict::Warn,
            "no status line of ours: {full:?}"
        );
        assert!(full.found.starts_with("all 7 events wired"), "{full:?}");
        let partial = hooks_check(file, &wired(&all[..5], "wakebridge hook"));
        assert_eq!(partial.verdict, Verdict::Fail);
        assert!(partial.found.contains("SessionEnd"), "{partial:?}");
        assert!(partial.fix.as_deref().unwrap().contains("claude install"));
        let other = hooks_check(file, &wired(&all, "wakebridge-other hook"));
        assert_eq!(other.verdict, Verdict::Fail);
        let missing = hooks_check(file, &Ok(None));
        assert!(missing.found.contains("does not exist"), "{missing:?}");
    }

    #[test]
    fn the_binary_must_start_from_the_hooks_path() {
        let all: Vec<&str> = WIRED_EVENTS.iter().map(|(e, _)| *e).collect();
        let env = Env::from_pairs([("PATH", "/nonexistent")]);
        let check = |command: &str| binary_check(&wired(&all, command).unwrap().unwrap(), &env);
        let gone = check("/nonexistent/wakebridge hook").unwrap();
        assert_eq!(gone.verdict, Verdict::Fail, "{gone:?}");
        let bare = check("wakebridge hook").unwrap();
        assert_eq!(bare.verdict, Verdict::Fail, "{bare:?}");
        let here = check(&format!("{} hook", env!("CARGO_MANIFEST_DIR"))).map(|c| c.verdict);
        assert_eq!(
            here, None,
            "a directory named like the binary is not a hook"
        );
        assert_eq!(check("/bin/sh hook"), None, "not a wakebridge hook at all");
    }

    #[test]
    fn the_bus_check_reads_registration_and_its_age() {
        let now = jiff::Timestamp::now();
        let health = |registered: Option<bool>, ago: Option<i64>| Health {
            status: "ok".into(),
            service: "wakebridge".into(),
            version: "1".into(),
            pid: 1,
            started_at: now,
            config_file: Shown::Hidden,
            bus_url: None,
            backend: None,
            registered,
            webhook_id: Shown::Value(Some(4)),
            last_verified_at: Shown::Value(ago.map(|s| now - jiff::SignedDuration::from_secs(s))),
            fleet: None,
        };
        let fresh = bus_check(&health(Some(true), Some(30)), now, "u");
        assert_eq!(fresh.verdict, Verdict::Ok);
        assert!(fresh.found.contains("webhook 4"), "{fresh:?}");
        let stale = health(Some(true), Some(600));
        assert_eq!(bus_check(&stale, now, "u").verdict, Verdict::Warn);
        let lost = bus_check(&health(Some(false), None), now, "http://bus/mcp");
        assert_eq!(lost.verdict, Verdict::Fail);
        assert!(lost.found.contains("http://bus/mcp"));
        assert_eq!(
            bus_check(&health(None, None), now, "u").verdict,
            Verdict::Warn
        );
    }

    #[test]
    fn a_multiplexer_missing_from_the_daemons_path_fails() {
        let mapped = BTreeMap::from([(
            "s1".to_string(),
            PaneTarget::Tmux {
                pane: "%1".into(),
                session: None,
            },
        )]);
        let mux = MuxConfig::default();
        let daemon = Env::from_pairs([("PATH", "/nonexistent")]);
        let shell = Env::from_pairs([("PATH", "/usr/bin:/bin")]);
        let check = multiplexer_check(&mux, &mapped, &shell, Some(&daemon));
        assert_eq!(check.verdict, Verdict::Fail, "{check:?}");
        assert!(
            check.found.contains("tmux is not on the daemon's PATH"),
            "{check:?}"
        );
    }

    #[test]
    fn waiting_sessions_are_reported_not_failed() {
        let sessions: Sessions = serde_json::from_value(json!({"sessions": [
            status_json("0123456789", json!({"events": 2, "since": "2026-12-01T12:00:00Z"}), Value::Null),
            status_json("abcdefghij", Value::Null, json!({"kind": "5-hour limit",
                "resets_at": null, "resets_text": "3pm", "seen_how": "hook",
                "since": "2026-12-01T12:00:00Z", "tries": 0, "gave_up": false,
                "shown": "resets 15:00, in 2h"})),
        ]}))
        .unwrap();
        let checks = waiting_checks(&sessions.sessions);
        assert!(checks.iter().all(|c| c.verdict == Verdict::Ok));
        assert!(
            checks[0].found.contains("2 event(s) owed to 1 session(s)"),
            "{checks:?}"
        );
        assert!(
            checks[1].found.contains("abcdefgh (resets 15:00, in 2h)"),
            "{checks:?}"
        );
    }

    /// A session with a pane (or not) and the inbox `/sessions` shows.
    fn session(pane: bool, inbox: Option<(bool, &str)>) -> SessionStatus {
        let mut session: SessionStatus =
            serde_json::from_value(status_json("0123456789", Value::Null, Value::Null)).unwrap();
        session.pane = pane.then(|| crate::api::Pane {
            mux: "tmux".into(),
            pane: "%1".into(),
            session: None,
        });
        session.inbox = inbox.map(|(live, problem)| crate::api::Inbox {
            live,
            problem: (!live).then(|| problem.to_owned()),
            last_sent_at: None,
            heard_at: None,
            held: false,
            unheard_since: None,
        });
        session
    }

    fn facts(version: &str, socket: bool, bypass: Option<bool>) -> InboxFacts {
        let socket = socket.then(|| PathBuf::from("/run/user/1/cc-socks/7.sock"));
        let version = Some(version.to_owned());
        InboxFacts {
            announced: Some(Announced { version, socket }),
            bypass,
        }
    }

    #[test]
    fn a_session_without_an_inbox_is_told_why_and_never_fails() {
        let typed = session(true, None);
        let old = inbox_check(&typed, &facts("2.1.100", false, None), None);
        assert_eq!(old.verdict, Verdict::Warn, "{old:?}");
        assert!(
            old.found
                .contains("01234567: Claude Code 2.1.100 has no inbox; wakes are typed"),
            "{old:?}"
        );
        assert!(old.fix.unwrap().contains("2.1.224+"));
        let off = inbox_check(&typed, &facts("2.1.332", false, None), None);
        assert_eq!(off.verdict, Verdict::Warn, "{off:?}");
        assert!(off.found.contains("its inbox is off (--bare"), "{off:?}");
        let untold = inbox_check(&session(false, None), &InboxFacts::default(), None);
        assert_eq!(untold.verdict, Verdict::Warn, "{untold:?}");
        assert!(untold.found.contains("no pane either"), "{untold:?}");
        let gone = session(true, Some((false, "no inbox socket at /x")));
        let gone = inbox_check(&gone, &facts("2.1.332", true, None), None);
        assert!(gone.found.contains("no inbox socket at /x"), "{gone:?}");
        assert_eq!(gone.verdict, Verdict::Warn);
        let mut held = session(true, Some((true, "")));
        held.inbox.as_mut().unwrap().held = true;
        let held = inbox_check(&held, &facts("2.1.332", true, Some(true)), None);
        assert_eq!(held.verdict, Verdict::Warn, "{held:?}");
        assert!(held.found.contains("waits for a human"), "{held:?}");
    }

    #[test]
    fn who_may_message_decides_whether_a_live_inbox_delivers() {
        let live = session(true, Some((true, "")));
        let check = |inbound: Option<Value>, bypass| {
            inbox_check(&live, &facts("2.1.332", true, bypass), inbound.as_ref())
        };
        let accepted = check(Some(json!("accept")), Some(true));
        assert_eq!(accepted.verdict, Verdict::Ok, "{accepted:?}");
        assert_eq!(check(None, Some(false)).verdict, Verdict::Ok);
        let unknown_mode = check(None, None);
        assert_eq!(unknown_mode.verdict, Verdict::Ok, "{unknown_mode:?}");
        for (inbound, bypass, says) in [
            (
                None,
                Some(true),
                "bypass mode and crossSessionInbound is unset",
            ),
            (Some(json!("hold")), Some(false), "waits for a human"),
            (Some(json!("refuse")), None, "drops every message"),
        ] {
            let held = check(inbound, bypass);
            assert_eq!(held.verdict, Verdict::Warn, "{held:?}");
            assert!(held.found.contains(says), "{held:?}");
            let fix = held.fix.unwrap();
            assert!(fix.contains("--accept-session-messages"), "{fix}");
        }
        let odd = check(Some(json!(true)), None);
        assert!(odd.found.contains("is true, which is not"), "{odd:?}");
        // A registry entry not found (the hook announced the inbox) still delivers.
        let hooked = inbox_check(&live, &InboxFacts::default(), Some(&json!("accept")));
        assert_eq!(hooked.verdict, Verdict::Ok, "{hooked:?}");
    }

    #[test]
    fn the_permission_mode_comes_from_the_transcripts_first_records() {
        let bypass = b"{\"type\":\"summary\"}\n{\"type\":\"permission-mode\",\"permissionMode\":\"bypassPermissions\"}\n{\"type\":\"us";
        assert_eq!(started_in_bypass(bypass), Some(true));
        let default = br#"{"type":"permission-mode","permissionMode":"default"}"#;
        assert_eq!(started_in_bypass(default), Some(false));
        assert_eq!(started_in_bypass(b"{\"type\":\"user\"}\nnot json\n"), None);
        assert_eq!(started_in_bypass(b""), None);
    }

    #[test]
    fn versions_before_2_1_224_have_no_inbox() {
        assert!(predates_inbox("2.1.100"));
        assert!(predates_inbox("2.0.999 (Claude Code)"));
        assert!(predates_inbox("1.9"));
        assert!(!predates_inbox("2.1.224"));
        assert!(!predates_inbox("2.1.332 (Claude Code)"));
        assert!(!predates_inbox("3.0.0"));
        assert!(!predates_inbox("nightly"), "unknown is not said to be old");
    }

    /// A `/sessions` entry as the daemon writes it, with `owed` and `limit`.
    fn status_json(id: &str, owed: Value, limit: Value) -> Value {
        json!({"session_id": id, "pane": null, "state": "idle", "reason": "",
            "cooldown_remaining_s": 0.0, "last_wake_at": null, "last_action": null,
            "last_delivery_at": null, "last_error_kind": null, "last_hook_event": null,
            "last_seen_at": null, "cwd": null, "transcript_path": null, "spool_lines": 0,
            "spool_bytes": 0, "context": null, "nudge": null, "owed": owed, "paid": null,
            "limit": limit, "rewind": null})
    }
}
