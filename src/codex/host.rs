//! Where a Codex hook runs. A TUI that joined the user's shared app-server (the usual case) has
//! its hooks run there, with the environment of whichever TUI started that server: nothing in it
//! but the home is this session's. A TUI started with `-c` overrides (or `--dangerously-bypass-
//! hook-trust`) runs its thread in its own process, the hooks as its children, in its own pane's
//! environment. Told by the hook's ancestors: an `app-server` among them is the shared one.

use std::sync::OnceLock;

use super::home::HOME_ENV;
use crate::env::Env;

/// What of a hook's environment `env` is its session's: all of it where the hook runs in the
/// TUI's own process, else (`in_app_server`) only where Codex keeps its files.
pub fn session_env(env: &Env, in_app_server: bool) -> Env {
    match in_app_server {
        true => env.only(&["HOME", HOME_ENV]),
        false => env.clone(),
    }
}

/// Ancestors looked at: the hook's shell, the server or TUI, and a wrapper or two.
const MAX_ANCESTORS: usize = 8;
/// The word in the shared server's command line (`codex app-server --listen unix:// …`).
const APP_SERVER: &[u8] = b"app-server";

/// Whether this process (a hook) runs under Codex's shared app-server; where ancestors cannot be
/// read (no `/proc`), it is taken to: then nothing but the home is read from the environment.
pub fn hook_runs_in_app_server() -> bool {
    static SHARED: OnceLock<bool> = OnceLock::new();
    *SHARED.get_or_init(|| under_app_server(std::process::id()).unwrap_or(true))
}

/// Whether an ancestor of `pid` is the app-server; `None` when `/proc` cannot tell.
fn under_app_server(pid: u32) -> Option<bool> {
    let mut pid = parent_of(pid)?;
    for _ in 0..MAX_ANCESTORS {
        if pid <= 1 {
            return Some(false);
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        if cmdline.split(|&b| b == 0).any(|arg| arg == APP_SERVER) {
            return Some(true);
        }
        pid = parent_of(pid)?;
    }
    Some(false)
}

/// The parent pid, from `/proc/<pid>/stat` (after the command's closing parenthesis: state, ppid).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hook_in_the_shared_server_reads_only_its_home_from_the_environment() {
        let shared = Env::from_pairs([
            ("HOME", "/h"),
            ("CODEX_HOME", "/c"),
            ("TMUX_PANE", "%3"),
            ("AGENT_EVENT_BUS_SESSION_ID", "first-tui"),
            ("WAKEBRIDGE", "keep"),
        ]);
        assert_eq!(
            session_env(&shared, true).vars(),
            [
                ("CODEX_HOME".into(), "/c".into()),
                ("HOME".into(), "/h".into())
            ]
        );
        assert_eq!(session_env(&shared, false).vars(), shared.vars());
    }

    #[test]
    fn a_process_under_an_app_server_is_told_from_one_that_is_not() {
        if !std::path::Path::new("/proc/self/stat").exists() {
            return;
        }
        assert_eq!(
            parent_of(std::process::id()),
            Some(std::os::unix::process::parent_id())
        );
        assert_eq!(under_app_server(std::process::id()), Some(false));
        // A child whose parent's command line names the app-server: `sh -c '… app-server'`
        // (the word as its own argument) with a `sleep` under it.
        let mut server = std::process::Command::new("sh")
            .args(["-c", "sleep 30; true", "app-server"])
            .spawn()
            .unwrap();
        let sleeper = (0..200).find_map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            let children =
                std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", server.id()))
                    .ok()?;
            children.split_whitespace().next()?.parse::<u32>().ok()
        });
        let found = sleeper.and_then(under_app_server);
        server.kill().unwrap();
        server.wait().unwrap();
        assert_eq!(found, Some(true), "sleeper {sleeper:?}");
    }
}
