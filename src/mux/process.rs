//! The one subprocess helper every multiplexer call goes through: run an argv under a
//! [`Deadline`] and turn every failure into one [`MuxError`]. A child past its budget is killed
//! with its process group and reaped before the error returns.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use crate::deadline::Deadline;

/// The least time any one call gets, however little of the budget is left: a late step (the
/// submit above all) still gets a fair chance instead of an instant timeout.
pub const STEP_FLOOR: Duration = Duration::from_millis(250);

/// How much of a failing command's whitespace-collapsed stderr is kept, as the reference does.
pub const STDERR_SUMMARY_CHARS: usize = 300;

/// Most stdout bytes kept from one call; the rest is drained so the child never blocks.
pub const MAX_STDOUT_BYTES: usize = 4 * 1024 * 1024;

const MAX_STDERR_BYTES: usize = 64 * 1024;

/// How long to wait for a killed child to be reaped; past it tokio's orphan reaper finishes.
const REAP_GRACE: Duration = Duration::from_millis(500);

#[derive(Debug, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
#[strum(serialize_all = "kebab-case")]
pub enum MuxError {
    #[error(
        "could not start {label} ({program}): {source}; check that it is installed and on the \
         daemon's PATH or set its path in the mux configuration"
    )]
    Spawn {
        label: &'static str,
        program: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{label} did not finish within {}ms and was killed", after.as_millis())]
    Timeout {
        label: &'static str,
        after: Duration,
    },
    #[error("{label} failed ({status}){}", stderr_suffix(stderr))]
    Exit {
        label: &'static str,
        status: String,
        stderr: String,
    },
    #[error("{label}: i/o error while running it: {source}")]
    Io {
        label: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("{label} printed unexpected output: {detail}")]
    Output { label: &'static str, detail: String },
    #[error(
        "the injection budget was spent before typing could start ({}ms left); nothing was typed",
        left.as_millis()
    )]
    #[strum(serialize = "timeout")]
    BudgetSpent { left: Duration },
}

fn stderr_suffix(stderr: &str) -> String {
    match stderr {
        "" => String::new(),
        said => format!(": {said}"),
    }
}

impl MuxError {
    /// Every value `kind` can take (`timeout` twice), for the error counters' zeros.
    pub const KINDS: &[&str] = <Self as strum::VariantNames>::VARIANTS;

    /// A stable short name for warn-once keys and metric labels.
    pub fn kind(&self) -> &'static str {
        self.into()
    }

    pub fn is_silent_exit(&self, code: i32) -> bool {
        matches!(self, MuxError::Exit { status, stderr, .. }
            if stderr.is_empty() && *status == format!("exit status {code}"))
    }

    pub fn stderr(&self) -> Option<&str> {
        match self {
            MuxError::Exit { stderr, .. } if !stderr.is_empty() => Some(stderr),
            _ => None,
        }
    }
}

/// One command line to run; the label names the step in errors without echoing the argv.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub label: &'static str,
    /// Written to the child's stdin; `None`: `/dev/null`.
    pub input: Option<Vec<u8>>,
}

impl Invocation {
    pub fn new(program: &Path, label: &'static str) -> Self {
        Self {
            program: program.to_path_buf(),
            args: Vec::new(),
            label,
            input: None,
        }
    }

    /// A child that exits without reading them all is not an error.
    pub fn input(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.input = Some(bytes.into());
        self
    }

    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn args(mut self, args: impl IntoIterator<Item = impl Into<OsString>>) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    pub stdout: String,
    /// Whitespace-collapsed and cut like an error's (some commands warn and succeed).
    pub stderr: String,
}

pub async fn run(inv: &Invocation, deadline: Deadline) -> Result<Finished, MuxError> {
    run_for(inv, deadline.step_budget(STEP_FLOOR)).await
}

/// [`run_for`] from synchronous code, on a runtime of its own.
pub fn run_blocking(inv: &Invocation, timeout: Duration) -> Result<Finished, MuxError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| MuxError::Io {
            label: inv.label,
            source,
        })?;
    runtime.block_on(run_for(inv, timeout))
}

pub async fn run_for(inv: &Invocation, timeout: Duration) -> Result<Finished, MuxError> {
    let label = inv.label;
    let mut command = Command::new(&inv.program);
    command
        .args(&inv.args)
        .stdin(match inv.input {
            Some(_) => Stdio::piped(),
            None => Stdio::null(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        // Its own process group, so a timeout can kill whatever the child started too (a
        // wrapper script's `sleep`), not only the child itself.
        .process_group(0);
    let mut child = spawn_retrying_busy_text(&mut command).map_err(|source| MuxError::Spawn {
        label,
        program: inv.program.clone(),
        source,
    })?;
    let mut group = GroupKiller::new(child.id());

    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        group.kill();
        return Err(MuxError::Io {
            label,
            source: io::Error::other("child pipes were not captured"),
        });
    };

    // Taken before `wait`, which would close it; written alongside the reads so a child that
    // writes before it reads cannot deadlock.
    let stdin = child.stdin.take();
    let feed = async move {
        if let (Some(mut pipe), Some(bytes)) = (stdin, inv.input.as_deref()) {
            // A child that exits or closes its stdin early is its own business.
            let _ = pipe.write_all(bytes).await;
        }
    };
    let collected = tokio::time::timeout(timeout, async {
        let ((), out, err, status) = tokio::join!(
            feed,
            read_capped(stdout, MAX_STDOUT_BYTES),
            read_capped(stderr, MAX_STDERR_BYTES),
            child.wait()
        );
        Ok::<_, io::Error>((out?, err?, status?))
    })
    .await;
    let collected = match collected {
        Ok(result) => result.map_err(|source| MuxError::Io { label, source }),
        Err(_elapsed) => Err(MuxError::Timeout {
            label,
            after: timeout,
        }),
    };
    let (out, err, status) = match collected {
        Ok(done) => done,
        Err(e) => {
            group.kill();
            let _ = tokio::time::timeout(REAP_GRACE, child.wait()).await;
            group.disarm();
            return Err(e);
        }
    };
    // Reaped by `wait`: the pid may be reused from here on, so never signal it again.
    group.disarm();
    let stderr = summarise_stderr(&err);
    if !status.success() {
        return Err(MuxError::Exit {
            label,
            status: describe_status(status),
            stderr,
        });
    }
    Ok(Finished {
        stdout: String::from_utf8_lossy(&out).into_owned(),
        stderr,
    })
}

/// Read a pipe to its end, keeping at most `cap` bytes, so a child never blocks on a full pipe.
async fn read_capped(mut pipe: impl AsyncRead + Unpin, cap: usize) -> io::Result<Vec<u8>> {
    let mut kept = Vec::new();
    (&mut pipe).take(cap as u64).read_to_end(&mut kept).await?;
    tokio::io::copy(&mut pipe, &mut tokio::io::sink()).await?;
    Ok(kept)
}

pub fn summarise_stderr(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    collapsed.chars().take(STDERR_SUMMARY_CHARS).collect()
}

fn describe_status(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => status.to_string(),
    }
}

/// Kills a child's whole process group unless disarmed. Armed from spawn until the child is
/// reaped: until then its pid (the group id) cannot be reused. Dropped armed (the caller's
/// future cancelled), it kills the group too; `kill_on_drop` alone would spare grandchildren.
struct GroupKiller {
    pgid: Option<libc::pid_t>,
}

impl GroupKiller {
    fn new(pid: Option<u32>) -> Self {
        Self {
            pgid: pid.and_then(|pid| libc::pid_t::try_from(pid).ok()),
        }
    }

    fn kill(&mut self) {
        if let Some(pgid) = self.pgid {
            // SAFETY: kill(2) has no memory-safety preconditions. The negative pid addresses
            // the process group this call created (`process_group(0)` makes the child its
            // leader) and the leader is not reaped yet, so the id cannot name anyone else.
            let _ = unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
    }

    fn disarm(&mut self) {
        self.pgid = None;
    }
}

impl Drop for GroupKiller {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Spawns `command`, retrying briefly on ETXTBSY: the program file is still open for writing
/// (a descriptor a fork holds until its exec, an upgrade replacing the binary), for milliseconds.
fn spawn_retrying_busy_text(command: &mut Command) -> io::Result<tokio::process::Child> {
    let mut attempts = 0;
    loop {
        match command.spawn() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && attempts < 20 => {
                attempts += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_summary_collapses_whitespace_and_cuts() {
        assert_eq!(
            summarise_stderr(b"  error:\n\tFound   argument '-p'\r\n"),
            "error: Found argument '-p'"
        );
        let long = "x".repeat(1000);
        assert_eq!(
            summarise_stderr(long.as_bytes()).chars().count(),
            STDERR_SUMMARY_CHARS
        );
    }

    #[test]
    fn stderr_summary_replaces_invalid_utf8_and_cuts_on_chars() {
        assert_eq!(summarise_stderr(b"bad \xff byte"), "bad \u{fffd} byte");
        let wide = "é".repeat(400);
        let cut = summarise_stderr(wide.as_bytes());
        assert_eq!(cut.chars().count(), STDERR_SUMMARY_CHARS);
    }

    #[test]
    fn kinds_are_stable() {
        let spawn = MuxError::Spawn {
            label: "tmux send-keys",
            program: "tmux".into(),
            source: io::Error::from(io::ErrorKind::NotFound),
        };
        assert_eq!(spawn.kind(), "spawn");
        let exit = MuxError::Exit {
            label: "tmux send-keys",
            status: "exit status 1".into(),
            stderr: "can't find pane: %9".into(),
        };
        assert_eq!(exit.kind(), "exit");
        assert_eq!(exit.stderr(), Some("can't find pane: %9"));
        assert!(exit.to_string().contains("can't find pane: %9"));
        let spent = MuxError::BudgetSpent {
            left: Duration::ZERO,
        };
        assert_eq!(spent.kind(), "timeout");
        for kind in [spawn.kind(), exit.kind(), spent.kind()] {
            assert!(MuxError::KINDS.contains(&kind), "{kind}");
        }
    }

    #[tokio::test]
    async fn a_silent_exit_is_told_from_one_that_says_why() {
        let run = |script: &str| {
            let inv = Invocation::new(Path::new("/bin/sh"), "sh").args(["-c", script]);
            async move { run_for(&inv, Duration::from_secs(5)).await.unwrap_err() }
        };
        assert!(run("exit 1").await.is_silent_exit(1));
        assert!(!run("exit 2").await.is_silent_exit(1));
        assert!(
            !run("echo 'no such tty' >&2; exit 1")
                .await
                .is_silent_exit(1)
        );
    }

    #[tokio::test]
    async fn runs_and_captures_stdout() {
        let inv = Invocation::new(Path::new("/bin/sh"), "sh")
            .arg("-c")
            .arg("printf 'a b'; echo warn >&2");
        let out = run_for(&inv, Duration::from_secs(5)).await.unwrap();
        assert_eq!(out.stdout, "a b");
        assert_eq!(out.stderr, "warn");
    }

    #[test]
    fn input_goes_to_stdin_even_unread() {
        let inv = Invocation::new(Path::new("/bin/sh"), "sh")
            .args(["-c", "read -r line; echo \"got $line\""])
            .input("one\ntwo\n");
        let out = run_blocking(&inv, Duration::from_secs(5)).unwrap();
        assert_eq!(out.stdout, "got one\n");
        let big = Invocation::new(Path::new("/bin/sh"), "sh")
            .args(["-c", "exit 0"])
            .input(vec![b'x'; 1 << 20]);
        assert!(run_blocking(&big, Duration::from_secs(5)).is_ok());
    }

    #[tokio::test]
    async fn non_zero_exit_carries_status_and_stderr() {
        let inv = Invocation::new(Path::new("/bin/sh"), "sh")
            .arg("-c")
            .arg("echo 'no   such\nthing' >&2; exit 3");
        let err = run_for(&inv, Duration::from_secs(5)).await.unwrap_err();
        assert_eq!(err.kind(), "exit");
        assert_eq!(err.stderr(), Some("no such thing"));
        assert!(err.to_string().contains("exit status 3"), "{err}");
    }

    #[tokio::test]
    async fn missing_binary_is_a_spawn_error() {
        let inv = Invocation::new(Path::new("/nonexistent/wakebridge-no-such-bin"), "tmux x");
        let err = run_for(&inv, Duration::from_secs(5)).await.unwrap_err();
        assert_eq!(err.kind(), "spawn");
        assert!(err.to_string().contains("PATH"), "{err}");
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("grandchild.pid");
        let script = format!("sleep 30 & echo $! > '{}'; wait", pidfile.display());
        let inv = Invocation::new(Path::new("/bin/sh"), "sh")
            .arg("-c")
            .arg(script);
        let started = std::time::Instant::now();
        let err = run_for(&inv, Duration::from_millis(300)).await.unwrap_err();
        assert_eq!(err.kind(), "timeout");
        assert!(started.elapsed() < Duration::from_secs(2));
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The grandchild got SIGKILL with its group; allow the kernel a moment to finish it.
        let mut alive = true;
        for _ in 0..50 {
            alive = process_is_running(pid);
            if !alive {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive, "grandchild {pid} survived the timeout");
    }

    /// Running means present in /proc and not a zombie waiting for its parent.
    fn process_is_running(pid: i32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => false,
            Ok(stat) => stat
                .rsplit_once(')')
                .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
                .unwrap_or(false),
        }
    }
}
