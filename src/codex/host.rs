//! Where a Codex hook runs, told by its nearest Codex ancestor's command line. A TUI that joined
//! the user's shared app-server (the usual case) has its hooks run there, with the environment
//! of whichever TUI started that server: nothing in it but the home is this session's. A TUI
//! started with `-c` overrides (or `--dangerously-bypass-hook-trust`) runs its thread in its own
//! process, the hooks as its children, in its own pane's environment. `codex exec` runs its
//! thread in its own process too, but in whatever pane started it, another agent's as often as
//! not (an agent calling Codex as a tool): its environment is not its session's either.

use std::path::Path;
use std::sync::OnceLock;

use super::home::HOME_ENV;
use crate::env::Env;

/// The process a Codex hook runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookHost {
    /// The shared app-server (`codex app-server …`), or no Codex ancestor could be read.
    AppServer,
    /// A TUI running its own thread, in its own pane.
    Tui,
    /// `codex exec`, headless, in whichever pane started it.
    Exec,
}

/// What of a hook's environment `env` is its session's: all of it under a TUI running its own
/// thread, else only where Codex keeps its files.
pub fn session_env(env: &Env, host: HookHost) -> Env {
    match host {
        HookHost::Tui => env.clone(),
        HookHost::AppServer | HookHost::Exec => env.only(&["HOME", HOME_ENV]),
    }
}

/// Ancestors looked at: the hook's shell, the server or TUI, and a wrapper or two.
const MAX_ANCESTORS: usize = 8;

/// What this process (a hook) runs under, looked up once. Where ancestors cannot be read (no
/// `/proc`), the app-server: then nothing but the home is read from the environment.
pub fn hook_host() -> HookHost {
    static HOST: OnceLock<HookHost> = OnceLock::new();
    *HOST.get_or_init(|| {
        let argvs = ancestors(std::process::id()).map(|pid| command_line(pid).unwrap_or_default());
        host_of(argvs)
    })
}

/// The host the nearest Codex process among `argvs` (command lines, nearest first) is.
fn host_of(argvs: impl Iterator<Item = Vec<String>>) -> HookHost {
    let is_codex = |arg: &String| Path::new(arg).file_name().is_some_and(|n| n == "codex");
    let nearest = argvs
        .take(MAX_ANCESTORS)
        .find(|argv| argv.iter().take(2).any(is_codex));
    let Some(argv) = nearest else {
        return HookHost::AppServer;
    };
    let subcommand = |word: &str| argv.iter().skip(1).any(|arg| arg == word);
    if subcommand("app-server") {
        HookHost::AppServer
    } else if subcommand("exec") || subcommand("e") {
        HookHost::Exec
    } else {
        HookHost::Tui
    }
}

/// The ancestors of `pid`, nearest first, as far as `/proc` tells.
fn ancestors(pid: u32) -> impl Iterator<Item = u32> {
    std::iter::successors(parent_of(pid), |&pid| parent_of(pid)).take_while(|&pid| pid > 1)
}

/// A process's command line, from `/proc/<pid>/cmdline`.
fn command_line(pid: u32) -> Option<Vec<String>> {
    let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args = bytes.split(|&b| b == 0).filter(|arg| !arg.is_empty());
    Some(
        args.map(|arg| String::from_utf8_lossy(arg).into_owned())
            .collect(),
    )
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
    fn only_a_tui_running_its_own_thread_has_its_environment_read() {
        let shared = Env::from_pairs([
            ("HOME", "/h"),
            ("CODEX_HOME", "/c"),
            ("TMUX_PANE", "%3"),
            ("AGENT_EVENT_BUS_SESSION_ID", "first-tui"),
            ("WAKEBRIDGE", "keep"),
        ]);
        let home_only = [
            ("CODEX_HOME".into(), "/c".into()),
            ("HOME".into(), "/h".into()),
        ];
        assert_eq!(session_env(&shared, HookHost::AppServer).vars(), home_only);
        assert_eq!(session_env(&shared, HookHost::Exec).vars(), home_only);
        assert_eq!(session_env(&shared, HookHost::Tui).vars(), shared.vars());
    }

    #[test]
    fn the_nearest_codex_ancestor_says_where_a_hook_runs() {
        let argv = |line: &str| line.split(' ').map(str::to_owned).collect::<Vec<_>>();
        let host = |lines: &[&str]| host_of(lines.iter().map(|l| argv(l)));
        let server = "/c/packages/app-server-daemon/releases/0.171.0/bin/codex app-server \
                      --listen unix:// --managed-daemon";
        let native = "/n/vendor/x86_64-unknown-linux-musl/bin/codex";
        assert_eq!(host(&["sh -c wakebridge", server]), HookHost::AppServer);
        let tui = format!("{native} -c hide_agent_reasoning=true");
        assert_eq!(
            host(&["sh -c wakebridge", &tui, "node /n/bin/codex -c x=y", "bash"]),
            HookHost::Tui
        );
        let exec = format!("{native} exec --skip-git-repo-check go");
        assert_eq!(host(&["sh -c wakebridge", &exec, "claude"]), HookHost::Exec);
        // The node wrapper alone names it too; no Codex ancestor at all is taken for the server.
        assert_eq!(host(&["sh", "node /n/bin/codex exec hi"]), HookHost::Exec);
        assert_eq!(host(&["sh", "bash", "tmux"]), HookHost::AppServer);
    }

    #[test]
    fn a_process_s_ancestors_are_read_from_proc() {
        if !Path::new("/proc/self/stat").exists() {
            return;
        }
        let me = std::process::id();
        assert_eq!(parent_of(me), Some(std::os::unix::process::parent_id()));
        assert_eq!(ancestors(me).next(), parent_of(me));
        let mine = command_line(me).unwrap_or_default();
        let exe = std::env::current_exe().unwrap();
        assert_eq!(
            mine.first().map(Path::new).and_then(Path::file_name),
            exe.file_name()
        );
    }
}
