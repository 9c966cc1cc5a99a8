//! Recording stand-ins for multiplexer binaries: a generated `/bin/sh` script, given to the
//! code under test as `tmux_bin`/`zellij_bin`, that appends its argv to a log file and then
//! answers each subcommand as the test scripted (print, fail with stderr, be slow, hang).
//! Needed for zellij (not installed here) and for failure modes a real tmux will not produce.

use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Separates argv elements in the log (ASCII unit separator; never in our arguments).
const ARG_SEPARATOR: char = '\u{1f}';

/// What the stand-in does for one subcommand.
#[derive(Debug, Clone)]
pub enum Step {
    /// Print this to stdout and exit 0.
    Print(String),
    /// Print this to stderr and exit with `code`.
    Fail { stderr: String, code: u8 },
    /// Sleep this many seconds, then exit 0.
    Slow(f64),
    /// Hang far longer than any budget (a sleeping grandchild, to test group kill); writes
    /// its own pid and the grandchild's to `<log>.pids`.
    Hang,
}

/// A stand-in binary plus its argv log. The script walks its argv in order; the first element
/// that equals a rule's word decides what it does; no match means exit 0 silently.
pub struct StandIn {
    pub bin: PathBuf,
    pub log: PathBuf,
}

pub struct StandInBuilder {
    name: String,
    rules: Vec<(String, Step)>,
}

impl StandInBuilder {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            rules: Vec::new(),
        }
    }

    /// When an argv element equals `word`, do `step`.
    pub fn on(mut self, word: &str, step: Step) -> Self {
        self.rules.push((word.to_owned(), step));
        self
    }

    /// Write the script into `dir`.
    pub fn write(self, dir: &Path) -> StandIn {
        super::timeout::arm_test_timeout();
        let bin = dir.join(&self.name);
        let log = dir.join(format!("{}.log", self.name));
        let pids = dir.join(format!("{}.log.pids", self.name));
        let mut script = String::from("#!/bin/sh\n");
        let _ = writeln!(
            script,
            "{{ for a in \"$@\"; do printf '%s\\037' \"$a\"; done; printf '\\n'; }} >> {}",
            quote(&log.to_string_lossy())
        );
        script.push_str("for a in \"$@\"; do\n  case \"$a\" in\n");
        for (word, step) in &self.rules {
            let action = match step {
                Step::Print(out) => format!("printf '%s' {}; exit 0", quote(out)),
                Step::Fail { stderr, code } => {
                    format!("printf '%s' {} >&2; exit {code}", quote(stderr))
                }
                Step::Slow(secs) => format!("sleep {secs}; exit 0"),
                Step::Hang => format!(
                    "sleep 30 & echo \"$$ $!\" > {}; wait; exit 0",
                    quote(&pids.to_string_lossy())
                ),
            };
            let _ = writeln!(script, "    {}) {action} ;;", quote(word));
        }
        script.push_str("  esac\ndone\nexit 0\n");
        std::fs::write(&bin, script).expect("write stand-in");
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755))
            .expect("chmod stand-in");
        StandIn { bin, log }
    }
}

impl StandIn {
    /// Every recorded call, as its argv (without the program name).
    pub fn calls(&self) -> Vec<Vec<String>> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .map(|line| {
                line.split(ARG_SEPARATOR)
                    .filter(|a| !a.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .collect()
    }

    /// Pids written by a `Step::Hang` call: (the stand-in itself, its sleeping child).
    pub fn hang_pids(&self) -> Option<(i32, i32)> {
        let text = std::fs::read_to_string(self.log.with_extension("log.pids")).ok()?;
        let mut it = text.split_whitespace().map(|p| p.parse().ok());
        Some((it.next()??, it.next()??))
    }
}

/// Single-quote for /bin/sh.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}
