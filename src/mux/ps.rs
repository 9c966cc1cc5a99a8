//! What `ps` says about processes, portably (procps on Linux, BSD ps on macOS): the process
//! table as pid → parent pid, and a process's descendants. Resolved on PATH.

use std::collections::{HashMap, VecDeque};
use std::path::Path;

use super::process::{self, Invocation, MuxError};
use crate::deadline::Deadline;

/// The `ps` binary, looked up on PATH.
pub const PS_BIN: &str = "ps";

/// Pid → parent pid for every process.
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

/// `root` and its descendants, breadth first, at most `max_depth` levels down.
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
