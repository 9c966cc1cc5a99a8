//! What `ps` says about processes, portably (procps on Linux, BSD ps on macOS).

use std::collections::{HashMap, VecDeque};
use std::path::Path;

use super::process::{self, Invocation, MuxError};
use crate::deadline::Deadline;

pub const PS_BIN: &str = "ps";

pub async fn parents(deadline: Deadline) -> Result<HashMap<u32, u32>, MuxError> {
    let inv = Invocation::new(Path::new(PS_BIN), "ps").args(["-A", "-o", "pid=", "-o", "ppid="]);
    let out = process::run(&inv, deadline).await?.stdout;
    Ok(out
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let pid = fields.next()?.parse().ok()?;
            let ppid = fields.next()?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalProcess {
    pub pid: u32,
    pub ppid: u32,
    /// The terminal's foreground process group (none: ps printed -1).
    pub tpgid: Option<u32>,
    pub pgid: u32,
    /// Where this system's ps prints it.
    pub sid: Option<u32>,
    /// The process name (procps: at most 15 bytes; macOS: the executable's path).
    pub command: String,
}

/// macOS's ps has no `sid` (its `sess` is a kernel pointer shown only to root): there the
/// session is found by parentage.
const PS_HAS_SID: bool = !cfg!(target_os = "macos");

/// `-o` columns, the command last: it is the only one that may contain spaces.
const TERMINAL_COLUMNS: &str = if PS_HAS_SID {
    "pid=,ppid=,tpgid=,pgid=,sid=,comm="
} else {
    "pid=,ppid=,tpgid=,pgid=,comm="
};

/// `ps -t <tty>` as printed (read it with [`parse_terminal`]). Empty when no process has that
/// terminal: ps then exits 1 saying nothing (a pane whose first process has not taken it yet).
pub async fn on_terminal(tty: &str, deadline: Deadline) -> Result<String, MuxError> {
    let args = ["-o", TERMINAL_COLUMNS, "-t", tty];
    let inv =
        Invocation::new(Path::new(PS_BIN), "ps (processes on the pane's terminal)").args(args);
    match process::run(&inv, deadline).await {
        Ok(done) => Ok(done.stdout),
        Err(err) if err.is_silent_exit(1) => Ok(String::new()),
        Err(err) => Err(err),
    }
}

/// Whether one of `pids` holds `file` open, from `/proc/<pid>/fd`; `None` without `/proc`.
pub fn holding_open(pids: &[u32], file: &Path) -> Option<bool> {
    if !Path::new("/proc/self/fd").exists() {
        return None;
    }
    // The links name the file as the kernel resolved it.
    let file = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_owned());
    let holds = |pid: &u32| {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            return false;
        };
        fds.flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target == file))
    };
    Some(pids.iter().any(holds))
}

pub fn parse_terminal(listing: &str) -> Vec<TerminalProcess> {
    parse_terminal_as(listing, PS_HAS_SID)
}

fn parse_terminal_as(listing: &str, with_sid: bool) -> Vec<TerminalProcess> {
    listing
        .lines()
        .filter_map(|row| {
            let mut cols = row.split_whitespace();
            let pid = cols.next()?.parse().ok()?;
            let ppid = cols.next()?.parse().ok()?;
            let tpgid = cols.next()?.parse::<i64>().ok()?;
            let pgid = cols.next()?.parse().ok()?;
            let sid = match with_sid {
                true => Some(cols.next()?.parse().ok()?),
                false => None,
            };
            let tpgid = u32::try_from(tpgid).ok();
            let command = cols.collect::<Vec<_>>().join(" ");
            (!command.is_empty()).then_some(TerminalProcess {
                pid,
                ppid,
                tpgid,
                pgid,
                sid,
                command,
            })
        })
        .collect()
}

/// The processes of the session `leader` leads: by session id, else (macOS) by descent through
/// the listing. Descent never admits another session's process, but misses a member whose
/// parent exited; for the guard, that errs on the side of not typing.
pub fn in_session(processes: &[TerminalProcess], leader: u32) -> Vec<&TerminalProcess> {
    let parent: HashMap<u32, u32> = processes.iter().map(|p| (p.pid, p.ppid)).collect();
    let descends = |mut pid: u32| {
        // Bounded by the listing's length: a pid table with a loop cannot hang the walk.
        for _ in 0..=processes.len() {
            if pid == leader {
                return true;
            }
            match parent.get(&pid) {
                Some(&ppid) if ppid != pid => pid = ppid,
                _ => return false,
            }
        }
        false
    };
    processes
        .iter()
        .filter(|p| match p.sid {
            Some(sid) => sid == leader,
            None => descends(p.pid),
        })
        .collect()
}

pub fn tree(root: u32, parents: &HashMap<u32, u32>, max_depth: usize) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (&pid, &ppid) in parents {
        if pid != ppid {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut queue = VecDeque::from([(root, 0usize)]);
    while let Some((pid, depth)) = queue.pop_front() {
        out.push(pid);
        if depth < max_depth
            && let Some(kids) = children.get(&pid)
        {
            let mut kids = kids.clone();
            kids.sort_unstable();
            queue.extend(kids.into_iter().map(|kid| (kid, depth + 1)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_walks_descendants_only() {
        let parents = HashMap::from([(10, 1), (11, 10), (12, 11), (20, 1), (13, 10)]);
        assert_eq!(tree(10, &parents, 6), [10, 11, 13, 12]);
        assert_eq!(tree(10, &parents, 1), [10, 11, 13]);
        // A self-parented entry (pid 0 on some systems) does not loop.
        let looped = HashMap::from([(0, 0), (5, 0)]);
        assert_eq!(tree(0, &looped, 6), [0, 5]);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_is_held_by_the_process_that_has_it_open_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let (held, other) = (dir.path().join("held"), dir.path().join("other"));
        std::fs::write(&other, "").unwrap();
        let _open = std::fs::File::create(&held).unwrap();
        let me = std::process::id();
        assert_eq!(holding_open(&[1, me], &held), Some(true));
        assert_eq!(holding_open(&[me], &other), Some(false));
        assert_eq!(holding_open(&[], &held), Some(false));
    }

    fn row(
        pid: u32,
        ppid: u32,
        tpgid: u32,
        pgid: u32,
        sid: Option<u32>,
        command: &str,
    ) -> TerminalProcess {
        TerminalProcess {
            pid,
            ppid,
            tpgid: Some(tpgid),
            pgid,
            sid,
            command: command.to_owned(),
        }
    }

    #[test]
    fn terminal_rows_parse_in_both_layouts() {
        let procps = "  4242  4200  4242  4242  4242 bash\n  4250  4242  4242  4242  4242 tmux: server\n\
                      junk\n";
        assert_eq!(
            parse_terminal_as(procps, true),
            [
                row(4242, 4200, 4242, 4242, Some(4242), "bash"),
                row(4250, 4242, 4242, 4242, Some(4242), "tmux: server"),
            ]
        );
        let macos = "  501     1   501   501 -zsh\n  520   501   520   520 /usr/local/bin/claude\n";
        assert_eq!(
            parse_terminal_as(macos, false),
            [
                row(501, 1, 501, 501, None, "-zsh"),
                row(520, 501, 520, 520, None, "/usr/local/bin/claude"),
            ]
        );
        // A row without its command, or short of a column, is left out; -1 is no foreground.
        assert!(parse_terminal_as("  1 2 3 4 5\n 1 2 3\n", true).is_empty());
        assert_eq!(
            parse_terminal_as(" 9 1 -1 9 9 sleep\n", true)[0].tpgid,
            None
        );
    }

    #[test]
    fn session_members_by_id_or_by_descent() {
        let pids = |rows: Vec<&TerminalProcess>| rows.iter().map(|p| p.pid).collect::<Vec<_>>();
        // By id: a process of another session on the same terminal is out, whatever its
        // parentage.
        let with_sid = [
            row(100, 1, 100, 100, Some(100), "bash"),
            row(110, 100, 100, 100, Some(100), "claude"),
            row(300, 100, 300, 300, Some(300), "claude"),
        ];
        assert_eq!(pids(in_session(&with_sid, 100)), [100, 110]);
        // By descent (macOS): the leader, its children and theirs; not a stranger, and not a
        // member whose parent is gone from the listing.
        let without_sid = [
            row(100, 1, 100, 100, None, "bash"),
            row(110, 100, 100, 100, None, "sh"),
            row(111, 110, 100, 100, None, "claude"),
            row(300, 1, 300, 300, None, "claude"),
            row(400, 399, 100, 100, None, "claude"),
        ];
        assert_eq!(pids(in_session(&without_sid, 100)), [100, 110, 111]);
        // A loop in the parent links ends the walk.
        let looped = [row(7, 8, 7, 7, None, "a"), row(8, 7, 7, 7, None, "b")];
        assert!(in_session(&looped, 100).is_empty());
    }

    #[tokio::test]
    async fn this_systems_ps_prints_the_terminal_columns() {
        // The columns' spelling is per system: ask this one's ps about this process.
        let inv = Invocation::new(Path::new(PS_BIN), "ps").args([
            "-o",
            TERMINAL_COLUMNS,
            "-p",
            &std::process::id().to_string(),
        ]);
        let out = process::run(&inv, Deadline::after(std::time::Duration::from_secs(5)))
            .await
            .unwrap()
            .stdout;
        let rows = parse_terminal(&out);
        assert_eq!(rows.len(), 1, "{out:?}");
        assert_eq!(rows[0].pid, std::process::id());
        assert_eq!(rows[0].ppid, std::os::unix::process::parent_id());
        if PS_HAS_SID {
            // SAFETY: getsid(0) only reads this process's session id.
            let sid = unsafe { libc::getsid(0) };
            assert_eq!(rows[0].sid, u32::try_from(sid).ok());
        }
    }

    #[tokio::test]
    async fn this_process_is_in_the_table_under_its_parent() {
        let parents = parents(Deadline::after(std::time::Duration::from_secs(5)))
            .await
            .unwrap();
        assert_eq!(
            parents.get(&std::process::id()),
            Some(&std::os::unix::process::parent_id())
        );
    }
}
