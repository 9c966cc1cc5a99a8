//! The per-test time bound. The shared helpers call [`arm_test_timeout`], which registers the
//! test (by its thread's name: libtest names each test's thread after the test)
//! with one watchdog thread for the whole process; the registration goes when the test's thread
//! ends, however the test ends. Real time is measured on the watchdog's own thread, so neither a
//! test blocked in a system call or a std sleep, nor a tokio runtime on a paused clock, can hide
//! a hang from it.
//!
//! When a test runs past [`TEST_TIMEOUT`], the watchdog writes to stderr which test it is and
//! every test still running, with their times, then stops what outlives this process and would
//! otherwise be left behind (the guards of a hung test never drop): every tmux server, zellij
//! world and mount a test registered with [`on_timeout`], and every child process of this one
//! (with its process group when it leads one), and exits with status 101, libtest's own for a
//! failed run.

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard, Once, PoisonError};
use std::time::{Duration, Instant};

/// How long one test may run: well above the slowest test today (about 40 s, the SIGKILL loop
/// in faults.rs, slower on a loaded 2-core machine) and above the longest wait a test makes on
/// purpose (the launcher's 120 s for a real Claude Code to get ready), so a test's own,
/// more specific failure always comes first.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(180);

/// How often the watchdog looks.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// How long the cleanup after a timeout may take before the process exits regardless.
const CLEANUP_LIMIT: Duration = Duration::from_secs(15);

struct Running {
    name: String,
    started: Instant,
}

type Cleanup = Box<dyn Fn() + Send>;

static RUNNING: Mutex<BTreeMap<u64, Running>> = Mutex::new(BTreeMap::new());
static CLEANUPS: Mutex<BTreeMap<u64, Cleanup>> = Mutex::new(BTreeMap::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(0);
static WATCHDOG: Once = Once::new();

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// This thread's registration: dropped, and so removed, when the thread ends. libtest runs
/// every test on a thread of its own (also with `--test-threads=1`), so that is when the test
/// ends, however it ends; the cases of a proptest, which all run on the test's thread, share
/// one registration.
struct Armed {
    id: u64,
}

impl Drop for Armed {
    fn drop(&mut self) {
        lock(&RUNNING).remove(&self.id);
    }
}

thread_local! {
    static ARMED: OnceCell<Armed> = const { OnceCell::new() };
}

/// Bounds the calling test by [`TEST_TIMEOUT`], from now until its thread ends. The shared
/// helpers call it (`common::tempdir`, the servers, the daemons, child processes, `eventually`),
/// so a test is bounded from the first thing it makes; a test that makes nothing runs only its
/// own code, in memory. Calling it again on that thread, or on a thread that is not a test's
/// (a runtime's worker: libtest names a test's thread `module::test`), changes nothing.
pub fn arm_test_timeout() {
    let Some(name) = std::thread::current()
        .name()
        .filter(|name| name.contains("::"))
        .map(str::to_owned)
    else {
        return;
    };
    WATCHDOG.call_once(|| {
        std::thread::Builder::new()
            .name("test-timeout-watchdog".into())
            .spawn(watch)
            .expect("spawn the test watchdog");
    });
    ARMED.with(|armed| {
        armed.get_or_init(|| {
            let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
            lock(&RUNNING).insert(
                id,
                Running {
                    name,
                    started: Instant::now(),
                },
            );
            Armed { id }
        });
    });
}

/// A cleanup to run if a test times out, while the returned guard lives: for what a Drop guard
/// would stop and the process's end does not (tmux and zellij servers, mounts).
#[must_use = "the cleanup is registered only while the guard lives"]
pub struct OnTimeout {
    id: u64,
}

pub fn on_timeout(cleanup: impl Fn() + Send + 'static) -> OnTimeout {
    arm_test_timeout();
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    lock(&CLEANUPS).insert(id, Box::new(cleanup));
    OnTimeout { id }
}

impl Drop for OnTimeout {
    fn drop(&mut self) {
        lock(&CLEANUPS).remove(&self.id);
    }
}

fn watch() {
    loop {
        std::thread::sleep(CHECK_EVERY);
        let mut running: Vec<(String, Duration)> = lock(&RUNNING)
            .values()
            .map(|test| (test.name.clone(), test.started.elapsed()))
            .collect();
        if !running.iter().any(|(_, took)| *took > TEST_TIMEOUT) {
            continue;
        }
        running.sort_by_key(|(_, took)| std::cmp::Reverse(*took));
        let list: Vec<String> = running
            .iter()
            .map(|(name, took)| format!("{name} ({} s)", took.as_secs()))
            .collect();
        let (name, took) = &running[0];
        // Straight to the process's stderr: print macros would go to the test's captured output,
        // which nobody prints once the process exits.
        let _ = writeln!(
            std::io::stderr().lock(),
            "\nTEST TIMEOUT: {name} has run for {} s, over the {} s bound of every integration \
             test (tests/it/common/timeout.rs). Tests still running: {}. Stopping the servers, \
             mounts and child processes they started, then exiting.",
            took.as_secs(),
            TEST_TIMEOUT.as_secs(),
            list.join(", "),
        );
        clean_up();
        std::process::exit(101);
    }
}

/// Runs every registered cleanup, then kills every child process; gives up after
/// `CLEANUP_LIMIT` so that a cleanup that hangs too cannot keep the process alive.
fn clean_up() {
    let cleanups: Vec<Cleanup> = std::mem::take(&mut *lock(&CLEANUPS))
        .into_values()
        .collect();
    let (done, finished) = mpsc::channel();
    let _ = std::thread::Builder::new()
        .name("test-timeout-cleanup".into())
        .spawn(move || {
            for cleanup in cleanups {
                cleanup();
            }
            kill_children();
            let _ = done.send(());
        });
    let _ = finished.recv_timeout(CLEANUP_LIMIT);
}

/// SIGKILLs every child of this process, and the process group of each that leads one (the
/// stand-ins and drainers some tests start in a group of their own).
fn kill_children() {
    let me = std::process::id().to_string();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return;
    };
    for pid in procs.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok()) {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // After the parenthesised command name: state, ppid, pgrp.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(1) != Some(&me.as_str()) {
            continue;
        }
        let leads_group = fields.get(2) == Some(&pid.to_string().as_str());
        // SAFETY: kill(2) on a child of this process (or the group it leads).
        unsafe { libc::kill(if leads_group { -pid } else { pid }, libc::SIGKILL) };
    }
}
