//! Processes a test starts: a guard that kills and reaps a child however the test ends, and
//! whether a pid is still a running process.

use std::process::Child;

/// Kills and reaps a child when dropped, so a failing test leaves no daemon behind.
pub struct ChildGuard(pub Child);

impl ChildGuard {
    pub fn new(child: Child) -> Self {
        super::timeout::arm_test_timeout();
        Self(child)
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Running means present in /proc and neither a zombie (Z) nor dead (X).
pub fn process_is_running(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        // The state follows the parenthesised command name.
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| {
            let state = rest.trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }),
    }
}
