//! The service managers as `wakebridge service` drives them: the `systemctl --user` and
//! `launchctl` command lines for loading, reloading and unloading, what they say about the
//! service (loaded, active, its pid), and the service's own last log lines. Each call goes
//! through the subprocess helper with its own deadline; the binaries are looked up on PATH.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::render::{LAUNCHD_LABEL, Platform};
use crate::mux::process::{self, Invocation, MuxError};

/// `systemctl`, on PATH.
const SYSTEMCTL: &str = "systemctl";
/// `launchctl`, on PATH.
const LAUNCHCTL: &str = "launchctl";
/// `journalctl`, on PATH.
const JOURNALCTL: &str = "journalctl";
/// The systemd unit name the commands address.
const UNIT: &str = "wakebridge";

/// Longest one service-manager call may take: `systemctl restart` waits for the old instance's
/// stop (the unit's `TimeoutStopSec=20`) and the new one's start.
const CALL_TIMEOUT: Duration = Duration::from_secs(45);
/// Longest a query (`show`, `print`, `journalctl`) may take: they answer at once.
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);
/// How many of the service's log lines a failed install shows.
pub const LOG_LINES: usize = 20;

/// What the service manager says about the service.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct State {
    /// Known to the manager (a unit it loaded, a job in the gui domain).
    pub loaded: bool,
    /// The manager's own words: `active (running)`, `inactive (dead)`, `running`, `not running`.
    pub state: String,
    /// The service's main process, when it runs.
    pub pid: Option<u32>,
}

/// One manager, for one user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manager {
    Systemd,
    Launchd { uid: u32 },
}

impl Manager {
    pub fn new(platform: Platform) -> Manager {
        match platform {
            Platform::Systemd => Manager::Systemd,
            Platform::Launchd => {
                // SAFETY: getuid cannot fail and touches no memory.
                let uid = unsafe { libc::getuid() };
                Manager::Launchd { uid }
            }
        }
    }

    /// `gui/<uid>/dev.wakebridge`: the launchd service target.
    fn target(uid: u32) -> String {
        format!("gui/{uid}/{LAUNCHD_LABEL}")
    }

    /// The commands that load `file` and (re)start the service; `running` says whether it was
    /// already loaded and running, so an upgrade takes effect.
    pub fn load_commands(&self, file: &Path, running: bool) -> Vec<Vec<String>> {
        let words = |w: &[&str]| w.iter().map(|s| (*s).to_string()).collect::<Vec<_>>();
        match self {
            Manager::Systemd => {
                let mut commands = vec![words(&[SYSTEMCTL, "--user", "daemon-reload"])];
                if running {
                    commands.push(words(&[SYSTEMCTL, "--user", "enable", UNIT]));
                    commands.push(words(&[SYSTEMCTL, "--user", "restart", UNIT]));
                } else {
                    commands.push(words(&[SYSTEMCTL, "--user", "enable", "--now", UNIT]));
                }
                commands
            }
            Manager::Launchd { uid } => {
                let mut commands = Vec::new();
                if running {
                    commands.push(words(&[LAUNCHCTL, "bootout", &Self::target(*uid)]));
                }
                commands.push(vec![
                    LAUNCHCTL.to_string(),
                    "bootstrap".to_string(),
                    format!("gui/{uid}"),
                    file.display().to_string(),
                ]);
                commands
            }
        }
    }

    /// The commands that stop and unload the service (the caller removes the file, then runs
    /// [`Manager::after_removal`]).
    pub fn unload_commands(&self) -> Vec<Vec<String>> {
        match self {
            Manager::Systemd => vec![vec![
                SYSTEMCTL.into(),
                "--user".into(),
                "disable".into(),
                "--now".into(),
                UNIT.into(),
            ]],
            Manager::Launchd { uid } => {
                vec![vec![LAUNCHCTL.into(), "bootout".into(), Self::target(*uid)]]
            }
        }
    }

    /// What runs once the file is gone: systemd forgets the unit at a reload.
    pub fn after_removal(&self) -> Vec<Vec<String>> {
        match self {
            Manager::Systemd => vec![vec![
                SYSTEMCTL.into(),
                "--user".into(),
                "daemon-reload".into(),
            ]],
            Manager::Launchd { .. } => Vec::new(),
        }
    }

    /// Where the service's output goes, as a reader finds it.
    pub fn log_hint(&self, log_dir: &Path) -> String {
        match self {
            Manager::Systemd => format!("journalctl --user -u {UNIT}"),
            Manager::Launchd { .. } => format!(
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
            Manager::Systemd => {
                let inv = Invocation::new(Path::new(SYSTEMCTL), "systemctl --user show").args([
                    "--user",
                    "show",
                    "--property=LoadState,ActiveState,SubState,MainPID",
                    UNIT,
                ]);
                let out = process::run_for(&inv, QUERY_TIMEOUT).await?;
                Ok(systemd_state(&out.stdout))
            }
            Manager::Launchd { uid } => {
                let inv = Invocation::new(Path::new(LAUNCHCTL), "launchctl print")
                    .args(["print".to_string(), Self::target(*uid)]);
                match process::run_for(&inv, QUERY_TIMEOUT).await {
                    Ok(out) => Ok(launchd_state(&out.stdout)),
                    // launchctl print exits non-zero (113) for a service it does not have.
                    Err(MuxError::Exit { .. }) => Ok(State {
                        loaded: false,
                        state: "not loaded".into(),
                        pid: None,
                    }),
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// The service's last [`LOG_LINES`] log lines, or why they could not be read.
    pub async fn last_log_lines(&self, log_dir: &Path) -> Result<String, String> {
        match self {
            Manager::Systemd => {
                let inv = Invocation::new(Path::new(JOURNALCTL), "journalctl").args([
                    "--user".to_string(),
                    "-u".to_string(),
                    UNIT.to_string(),
                    "-n".to_string(),
                    LOG_LINES.to_string(),
                    "--no-pager".to_string(),
                ]);
                process::run_for(&inv, QUERY_TIMEOUT)
                    .await
                    .map(|out| out.stdout)
                    .map_err(|e| e.to_string())
            }
            Manager::Launchd { .. } => {
                let file = log_dir.join("wakebridge.err");
                std::fs::read_to_string(&file)
                    .map(|text| last_lines(&text, LOG_LINES))
                    .map_err(|e| format!("cannot read {}: {e}", file.display()))
            }
        }
    }
}

/// Runs one command line (from [`Manager::load_commands`] and friends) with [`CALL_TIMEOUT`].
pub async fn run(argv: &[String]) -> Result<(), MuxError> {
    let Some((program, args)) = argv.split_first() else {
        return Ok(());
    };
    let inv = Invocation::new(&PathBuf::from(program), label(argv)).args(args);
    process::run_for(&inv, CALL_TIMEOUT).await.map(|_| ())
}

/// A fixed label for an argv (errors name the step, not the whole line).
fn label(argv: &[String]) -> &'static str {
    let verb = argv
        .iter()
        .skip(1)
        .find(|w| !w.starts_with('-'))
        .map_or("", String::as_str);
    match (argv.first().map(String::as_str), verb) {
        (Some(SYSTEMCTL), "daemon-reload") => "systemctl --user daemon-reload",
        (Some(SYSTEMCTL), "enable") => "systemctl --user enable",
        (Some(SYSTEMCTL), "restart") => "systemctl --user restart",
        (Some(SYSTEMCTL), "disable") => "systemctl --user disable",
        (Some(LAUNCHCTL), "bootout") => "launchctl bootout",
        (Some(LAUNCHCTL), "bootstrap") => "launchctl bootstrap",
        _ => "service manager",
    }
}

/// `systemctl show` output (`Key=value` lines) as a [`State`].
pub fn systemd_state(text: &str) -> State {
    let props: BTreeMap<&str, &str> = text
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect();
    let get = |key| props.get(key).copied().unwrap_or_default();
    let pid = get("MainPID").parse::<u32>().ok().filter(|pid| *pid > 0);
    State {
        loaded: get("LoadState") == "loaded",
        state: format!("{} ({})", get("ActiveState"), get("SubState")),
        pid,
    }
}

/// `launchctl print` output as a [`State`]: the service's own `state = ...` and `pid = N`
/// lines, one tab in (nested blocks, such as endpoints and the arguments, are indented further
/// and may have their own).
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
        pid: field("pid")
            .and_then(|p| p.parse::<u32>().ok())
            .filter(|p| *p > 0),
    }
}

/// The last `n` lines of `text`.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
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
        let file = Path::new("/h/.config/systemd/user/wakebridge.service");
        let m = Manager::Systemd;
        assert_eq!(
            m.load_commands(file, false),
            [
                vec!["systemctl", "--user", "daemon-reload"],
                vec!["systemctl", "--user", "enable", "--now", "wakebridge"]
            ]
        );
        assert_eq!(
            m.load_commands(file, true)[2],
            ["systemctl", "--user", "restart", "wakebridge"]
        );
        let m = Manager::Launchd { uid: 501 };
        let plist = Path::new("/Users/u/Library/LaunchAgents/dev.wakebridge.plist");
        assert_eq!(
            m.load_commands(plist, true),
            [
                vec!["launchctl", "bootout", "gui/501/dev.wakebridge"],
                vec![
                    "launchctl",
                    "bootstrap",
                    "gui/501",
                    "/Users/u/Library/LaunchAgents/dev.wakebridge.plist"
                ]
            ]
        );
        assert_eq!(
            label(&m.load_commands(plist, true)[1]),
            "launchctl bootstrap"
        );
        assert_eq!(last_lines("a\nb\nc\n", 2), "b\nc");
    }
}
