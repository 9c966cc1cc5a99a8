//! The service managers as `wakebridge service` drives them: the `systemctl --user` and
//! `launchctl` command lines that load and unload the service, what they say about it (loaded,
//! its state, its pid) and its last log lines. Each call goes through `mux::process`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::render::{LAUNCHD_LABEL, Platform};
use crate::mux::process::{self, Invocation, MuxError};

/// The systemd unit the commands address.
const UNIT: &str = "wakebridge";
/// Longest a load or unload may take: `systemctl restart` waits out the old instance's stop
/// (the unit's `TimeoutStopSec=20`) and the new one's start.
const CALL_TIMEOUT: Duration = Duration::from_secs(45);
/// Longest a query (`show`, `print`, `journalctl`) may take: they answer at once.
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);
/// How many of the service's log lines a failed install shows.
const LOG_LINES: usize = 20;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct State {
    /// Known to the manager (a unit it loaded, a job in the gui domain).
    pub loaded: bool,
    /// The manager's own words: `active (running)`, `inactive (dead)`, `running`, `not running`.
    pub state: String,
    /// The service's main process, when it runs.
    pub pid: Option<u32>,
}

fn systemctl(args: &[&str]) -> Invocation {
    Invocation::new(Path::new("systemctl"), "systemctl --user")
        .arg("--user")
        .args(args)
}

fn launchctl(args: &[&str]) -> Invocation {
    Invocation::new(Path::new("launchctl"), "launchctl").args(args)
}

/// A command line as a person would type it.
pub fn shown(inv: &Invocation) -> String {
    let args = inv.args.iter().map(|arg| arg.to_string_lossy());
    let words: Vec<_> = std::iter::once(inv.program.to_string_lossy())
        .chain(args)
        .collect();
    shlex::try_join(words.iter().map(|w| &**w)).unwrap_or_else(|_| words.join(" "))
}

/// Runs one command with [`CALL_TIMEOUT`], and says it ran.
pub async fn run(inv: &Invocation) -> Result<(), MuxError> {
    process::run_for(inv, CALL_TIMEOUT).await?;
    crate::outln!("ran: {}", shown(inv));
    Ok(())
}

/// launchd's domain of this user's agents.
pub fn gui_domain() -> String {
    // SAFETY: getuid cannot fail and touches no memory.
    format!("gui/{}", unsafe { libc::getuid() })
}

fn target() -> String {
    format!("{}/{LAUNCHD_LABEL}", gui_domain())
}

/// The service manager of each platform.
impl Platform {
    /// The commands that load `file` and (re)start the service; `running` says whether it was
    /// already running, so that an upgrade takes effect.
    pub fn load_commands(&self, file: &Path, running: bool) -> Vec<Invocation> {
        match (self, running) {
            (Platform::Systemd, true) => vec![
                systemctl(&["daemon-reload"]),
                systemctl(&["enable", UNIT]),
                systemctl(&["restart", UNIT]),
            ],
            (Platform::Systemd, false) => vec![
                systemctl(&["daemon-reload"]),
                systemctl(&["enable", "--now", UNIT]),
            ],
            (Platform::Launchd, _) => {
                let bootstrap = launchctl(&["bootstrap", &gui_domain()]).arg(file);
                let bootout = running.then(|| launchctl(&["bootout", &target()]));
                bootout.into_iter().chain([bootstrap]).collect()
            }
        }
    }

    /// The commands that stop and unload the service (before its file is removed), and what
    /// runs once the file is gone (systemd forgets the unit at a reload).
    pub fn unload_commands(&self) -> (Vec<Invocation>, Vec<Invocation>) {
        match self {
            Platform::Systemd => (
                vec![systemctl(&["disable", "--now", UNIT])],
                vec![systemctl(&["daemon-reload"])],
            ),
            Platform::Launchd => (vec![launchctl(&["bootout", &target()])], Vec::new()),
        }
    }

    pub fn log_hint(&self, log_dir: &Path) -> String {
        match self {
            Platform::Systemd => format!("journalctl --user -u {UNIT}"),
            Platform::Launchd => format!(
                "{} (stderr) and {} (stdout)",
                log_dir.join("wakebridge.err").display(),
                log_dir.join("wakebridge.log").display()
            ),
        }
    }

    /// The manager's view of the service. A manager that does not know it answers "not loaded";
    /// one that cannot be asked at all is an error.
    pub async fn state(&self) -> Result<State, MuxError> {
        match self {
            Platform::Systemd => {
                let props = "--property=LoadState,ActiveState,SubState,MainPID";
                let inv = systemctl(&["show", props, UNIT]);
                let out = process::run_for(&inv, QUERY_TIMEOUT).await?;
                Ok(systemd_state(&out.stdout))
            }
            Platform::Launchd => {
                let inv = launchctl(&["print", &target()]);
                match process::run_for(&inv, QUERY_TIMEOUT).await {
                    Ok(out) => Ok(launchd_state(&out.stdout)),
                    // launchctl print exits non-zero (113) for a service it does not have.
                    Err(MuxError::Exit { .. }) => Ok(State {
                        state: "not loaded".into(),
                        ..State::default()
                    }),
                    Err(e) => Err(e),
                }
            }
        }
    }

    pub async fn last_log_lines(&self, log_dir: &Path) -> Result<String, String> {
        let lines = LOG_LINES.to_string();
        let args = ["--user", "-u", UNIT, "-n", &lines, "--no-pager"];
        let inv = Invocation::new(Path::new("journalctl"), "journalctl").args(args);
        match self {
            Platform::Systemd => process::run_for(&inv, QUERY_TIMEOUT)
                .await
                .map(|out| out.stdout)
                .map_err(|e| e.to_string()),
            Platform::Launchd => {
                let file = log_dir.join("wakebridge.err");
                let text = std::fs::read_to_string(&file)
                    .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
                let lines: Vec<&str> = text.lines().collect();
                Ok(lines[lines.len().saturating_sub(LOG_LINES)..].join("\n"))
            }
        }
    }
}

/// `systemctl show` output: `Key=value` lines.
pub fn systemd_state(text: &str) -> State {
    let props: BTreeMap<&str, &str> = text
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect();
    let get = |key| props.get(key).copied().unwrap_or_default();
    State {
        loaded: get("LoadState") == "loaded",
        state: format!("{} ({})", get("ActiveState"), get("SubState")),
        pid: get("MainPID").parse::<u32>().ok().filter(|pid| *pid > 0),
    }
}

/// `launchctl print` output: the service's own `state = ...` and `pid = N` lines, one tab in
/// (nested blocks, indented further, may have their own).
pub fn launchd_state(text: &str) -> State {
    let field = |name: &str| {
        text.lines()
            .filter(|line| line.starts_with('\t') && !line.starts_with("\t\t"))
            .find_map(|line| {
                let (key, value) = line.trim().split_once('=')?;
                (key.trim() == name).then(|| value.trim().to_string())
            })
    };
    State {
        loaded: true,
        state: field("state").unwrap_or_else(|| "loaded".into()),
        pid: field("pid").and_then(|p| p.parse().ok()).filter(|p| *p > 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn systemd_show_is_read_by_key() {
        let s =
            systemd_state("LoadState=loaded\nActiveState=active\nSubState=running\nMainPID=4242\n");
        assert_eq!(
            s,
            State {
                loaded: true,
                state: "active (running)".into(),
                pid: Some(4242)
            }
        );
        let s =
            systemd_state("MainPID=0\nLoadState=not-found\nActiveState=inactive\nSubState=dead\n");
        assert_eq!((s.loaded, s.pid), (false, None));
        assert_eq!(s.state, "inactive (dead)");
    }

    #[test]
    fn launchd_print_gives_the_outer_state_and_pid() {
        let text = "gui/501/dev.wakebridge = {\n\tendpoints = {\n\t\tpid = 1\n\t}\n\tactive count = 1\n\tpath = /Users/u/Library/LaunchAgents/dev.wakebridge.plist\n\tstate = running\n\n\tprogram = /bin/sh\n\tpid = 812\n\tlast exit code = (never exited)\n\tendpoints = {\n\t\tpid = 1\n\t}\n}\n";
        let s = launchd_state(text);
        assert_eq!(s.state, "running");
        assert_eq!(s.pid, Some(812));
        let s = launchd_state(
            "gui/501/dev.wakebridge = {\n\tstate = not running\n\tlast exit code = 1\n}\n",
        );
        assert_eq!(
            (s.loaded, s.pid, s.state.as_str()),
            (true, None, "not running")
        );
    }

    #[test]
    fn commands_restart_a_running_service_and_start_a_stopped_one() {
        let shown_all = |c: Vec<Invocation>| c.iter().map(shown).collect::<Vec<_>>();
        let file = Path::new("/h/.config/systemd/user/wakebridge.service");
        let m = Platform::Systemd;
        assert_eq!(
            shown_all(m.load_commands(file, false)),
            [
                "systemctl --user daemon-reload",
                "systemctl --user enable --now wakebridge"
            ]
        );
        assert_eq!(
            shown_all(m.load_commands(file, true))[2],
            "systemctl --user restart wakebridge"
        );
        let m = Platform::Launchd;
        let plist = Path::new("/Users/a b/Library/LaunchAgents/dev.wakebridge.plist");
        assert_eq!(
            shown_all(m.load_commands(plist, true)),
            [
                format!("launchctl bootout {}/dev.wakebridge", gui_domain()),
                format!(
                    "launchctl bootstrap {} '/Users/a b/Library/LaunchAgents/dev.wakebridge.plist'",
                    gui_domain()
                )
            ]
        );
    }
}
