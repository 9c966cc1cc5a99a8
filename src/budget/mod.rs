//! The usage budget: the 5-hour and 7-day windows Claude Code reports to its status line
//! (`rate_limits`, subscribers only), kept per Claude Code account (its config directory) in one
//! small file each under `<state_dir>/budget/`. `wakebridge statusline` writes them; the daemon's
//! session loop, `/sessions` and `/metrics` read them. Within a window the used share only grows,
//! so a reading merges by keeping the larger share, and a window is forgotten at its reset.
//! What the readings mean for nudging is [`policy`]'s.

pub mod caused;
pub mod policy;

use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::api;
use crate::private_fs;

/// A reading this much younger than the stored one is not written again when nothing else
/// changed: the status line runs on every token count, and each write is an fsync.
const REWRITE_AFTER_MS: i64 = 60_000;
/// Two readings whose resets differ by less than this are the same window (Claude Code rounds).
pub const SAME_WINDOW_MS: i64 = 10 * 60_000;
/// Bytes read from a budget file at most: real ones are ~300.
const MAX_FILE: u64 = 16 * 1024;

/// The two windows, by their name in Claude Code's `rate_limits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum WindowKind {
    FiveHour,
    SevenDay,
}

impl WindowKind {
    pub const ALL: [WindowKind; 2] = [WindowKind::FiveHour, WindowKind::SevenDay];

    /// How a person calls it: `5-hour window`, `weekly window`.
    pub fn describe(self) -> &'static str {
        match self {
            WindowKind::FiveHour => "5-hour window",
            WindowKind::SevenDay => "weekly window",
        }
    }
}

/// One window as last reported.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// Percent of the window used, 0..=100.
    pub used_percentage: f64,
    /// When it resets (unix ms), if Claude Code said.
    pub resets_at_ms: Option<i64>,
    /// When a status line last reported it (unix ms).
    pub seen_ms: i64,
}

impl Window {
    /// Over: its reset has passed, so its share no longer says anything (the next window starts
    /// at the next use). A window without a reset is over once `stale_ms` passed unseen.
    pub fn over(&self, now_ms: i64, stale_ms: i64) -> bool {
        match self.resets_at_ms {
            Some(at) => at <= now_ms,
            None => now_ms.saturating_sub(self.seen_ms) > stale_ms,
        }
    }

    /// `newer` read after `self`: within one window the larger share wins (a session's status
    /// line may repeat an old figure); a later window, or one whose reset is now known,
    /// replaces it. Two readings without a reset are never the same window: the newer wins, so
    /// a share cannot stick for good.
    fn merged(self, newer: Window) -> Window {
        match (self.resets_at_ms, newer.resets_at_ms) {
            (Some(old), Some(new)) if old.abs_diff(new) < SAME_WINDOW_MS.unsigned_abs() => Window {
                used_percentage: self.used_percentage.max(newer.used_percentage),
                resets_at_ms: Some(new),
                seen_ms: self.seen_ms.max(newer.seen_ms),
            },
            (Some(old), Some(new)) if new < old => self,
            (Some(_), None) => self,
            _ => newer,
        }
    }
}

/// One account's windows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Account {
    /// The Claude Code config directory (`~/.claude`, or `CLAUDE_CONFIG_DIR`).
    pub account: PathBuf,
    pub five_hour: Option<Window>,
    pub seven_day: Option<Window>,
}

impl Account {
    pub fn window(&self, kind: WindowKind) -> Option<&Window> {
        match kind {
            WindowKind::FiveHour => self.five_hour.as_ref(),
            WindowKind::SevenDay => self.seven_day.as_ref(),
        }
    }

    fn window_mut(&mut self, kind: WindowKind) -> &mut Option<Window> {
        match kind {
            WindowKind::FiveHour => &mut self.five_hour,
            WindowKind::SevenDay => &mut self.seven_day,
        }
    }

    /// The windows still running at `now_ms`, by kind.
    pub fn running(
        &self,
        now_ms: i64,
        stale_ms: i64,
    ) -> impl Iterator<Item = (WindowKind, Window)> {
        WindowKind::ALL.into_iter().filter_map(move |kind| {
            let window = *self.window(kind)?;
            (!window.over(now_ms, stale_ms)).then_some((kind, window))
        })
    }

    /// Each window's share and reset: what a reader sees change.
    fn figures(&self) -> [Option<(f64, Option<i64>)>; 2] {
        WindowKind::ALL.map(|k| self.window(k).map(|w| (w.used_percentage, w.resets_at_ms)))
    }

    /// When a status line last reported any of its windows.
    fn seen_ms(&self) -> i64 {
        let seen = WindowKind::ALL.map(|k| self.window(k).map_or(0, |w| w.seen_ms));
        seen.into_iter().max().unwrap_or(0)
    }

    /// `self` with `newer`'s windows merged in.
    fn merged(&self, newer: &Account) -> Account {
        let mut merged = self.clone();
        for kind in WindowKind::ALL {
            let slot = merged.window_mut(kind);
            *slot = match (*slot, newer.window(kind).copied()) {
                (Some(old), Some(new)) => Some(old.merged(new)),
                (old, new) => new.or(old),
            };
        }
        merged
    }
}

/// The windows in a status line's `rate_limits`, read at `now_ms`.
pub fn from_statusline(rate_limits: &Value, account: PathBuf, now_ms: i64) -> Option<Account> {
    let window = |kind: WindowKind| {
        let block = rate_limits.get(<&str>::from(kind))?;
        let used = block
            .get("used_percentage")
            .and_then(Value::as_f64)
            .filter(|u| u.is_finite())?;
        Some(Window {
            used_percentage: used.clamp(0.0, 100.0),
            resets_at_ms: block
                .get("resets_at")
                .and_then(crate::reading::limit::reset_ms),
            seen_ms: now_ms,
        })
    };
    let account = Account {
        account,
        five_hour: window(WindowKind::FiveHour),
        seven_day: window(WindowKind::SevenDay),
    };
    (account.five_hour.is_some() || account.seven_day.is_some()).then_some(account)
}

pub fn budget_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("budget")
}

fn file_of(state_dir: &Path, account: &Path) -> PathBuf {
    let digest = Sha256::digest(account.as_os_str().as_encoded_bytes());
    let name: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    budget_dir(state_dir).join(format!("{name}.json"))
}

fn read_file(path: &Path) -> Option<Account> {
    let mut body = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_FILE)
        .read_to_end(&mut body)
        .ok()?;
    serde_json::from_slice(&body).ok()
}

/// Merges a status line's reading into its account's file; writes only when something changed
/// or the stored reading is over a minute old.
pub fn record(state_dir: &Path, reading: &Account) -> Result<(), RecordError> {
    let path = file_of(state_dir, &reading.account);
    let stored = read_file(&path).filter(|s| s.account == reading.account);
    let merged = stored
        .as_ref()
        .map_or_else(|| reading.clone(), |s| s.merged(reading));
    if let Some(stored) = &stored
        && stored.figures() == merged.figures()
        && merged.seen_ms().saturating_sub(stored.seen_ms()) < REWRITE_AFTER_MS
    {
        return Ok(());
    }
    // Serialising plain data cannot fail; an empty body would only make the file unreadable.
    let body = serde_json::to_vec(&merged).unwrap_or_default();
    private_fs::create_dir(&budget_dir(state_dir))
        .and_then(|()| private_fs::replace(&path, &body, ".wakebridge."))
        .map_err(|source| RecordError { path, source })
}

#[derive(Debug, thiserror::Error)]
#[error("cannot write the usage windows to {path}: {source}; check that the state dir is writable")]
pub struct RecordError {
    path: PathBuf,
    source: std::io::Error,
}

/// Every account's windows, by account; unreadable files are skipped.
pub fn read_all(state_dir: &Path) -> Vec<Account> {
    let Ok(entries) = std::fs::read_dir(budget_dir(state_dir)) else {
        return Vec::new();
    };
    let mut accounts: Vec<Account> = entries
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .filter_map(|e| read_file(&e.path()))
        .collect();
    accounts.sort_by(|a, b| a.account.cmp(&b.account));
    accounts
}

/// Every account's running windows as `/sessions` shows them.
pub fn shown(state_dir: &Path, stale_ms: i64, now_ms: i64) -> Vec<api::Budget> {
    let window = |account: &Account, kind| {
        let w = account.window(kind).filter(|w| !w.over(now_ms, stale_ms))?;
        Some(api::BudgetWindow {
            used_percentage: w.used_percentage,
            resets_at: w.resets_at_ms.and_then(crate::clock::shown_ms),
            seen_at: crate::clock::shown_ms(w.seen_ms),
            stale: now_ms.saturating_sub(w.seen_ms) > stale_ms,
        })
    };
    read_all(state_dir)
        .iter()
        .map(|a| api::Budget {
            account: a.account.display().to_string(),
            five_hour: window(a, WindowKind::FiveHour),
            seven_day: window(a, WindowKind::SevenDay),
        })
        .filter(|b| b.five_hour.is_some() || b.seven_day.is_some())
        .collect()
}

/// The windows of `account` (a session's, [`account_of`] its transcript); none when it is not
/// known: another account's usage says nothing about it.
pub fn of_account<'a>(accounts: &'a [Account], account: Option<&Path>) -> Option<&'a Account> {
    accounts
        .iter()
        .find(|a| Some(a.account.as_path()) == account)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: i64 = 1_800_000_000_000;
    const HOUR: i64 = 3_600_000;

    fn window(used: f64, resets_in: i64, seen: i64) -> Window {
        Window {
            used_percentage: used,
            resets_at_ms: Some(NOW + resets_in),
            seen_ms: seen,
        }
    }

    #[test]
    fn a_status_line_block_becomes_both_windows() {
        let reset_s = (NOW + 2 * HOUR) / 1000;
        let block = json!({
            "five_hour": {"used_percentage": 62.5, "resets_at": reset_s},
            "seven_day": {"used_percentage": 41, "resets_at": reset_s + 86_400},
        });
        let account = from_statusline(&block, "/h/.claude".into(), NOW).unwrap();
        assert_eq!(account.five_hour, Some(window(62.5, 2 * HOUR, NOW)));
        assert_eq!(account.seven_day.unwrap().used_percentage, 41.0);
        assert_eq!(from_statusline(&json!({}), "/h".into(), NOW), None);
        let odd = json!({"five_hour": {"used_percentage": "lots"}});
        assert_eq!(from_statusline(&odd, "/h".into(), NOW), None);
    }

    #[test]
    fn within_a_window_the_larger_share_wins_and_a_new_window_replaces_it() {
        let old = window(70.0, HOUR, NOW - 1000);
        assert_eq!(
            old.merged(window(40.0, HOUR + 1000, NOW)).used_percentage,
            70.0
        );
        assert_eq!(old.merged(window(80.0, HOUR, NOW)).used_percentage, 80.0);
        let next = window(5.0, 6 * HOUR, NOW);
        assert_eq!(old.merged(next), next);
        // An old figure from the window before does not come back.
        assert_eq!(next.merged(old), next);
        // Without a reset the newer reading wins, and a known reset replaces an unknown one.
        let unknown = |used, seen| Window {
            used_percentage: used,
            resets_at_ms: None,
            seen_ms: seen,
        };
        assert_eq!(
            unknown(95.0, NOW - 1).merged(unknown(20.0, NOW)),
            unknown(20.0, NOW)
        );
        assert_eq!(unknown(95.0, NOW - 1).merged(old), old);
        assert_eq!(old.merged(unknown(99.0, NOW)), old);
    }

    #[test]
    fn a_window_is_over_at_its_reset_or_unseen_for_long_without_one() {
        assert!(!window(50.0, 1, NOW).over(NOW, HOUR));
        assert!(window(50.0, 0, NOW).over(NOW, HOUR));
        let no_reset = Window {
            resets_at_ms: None,
            ..window(50.0, 0, NOW - 2 * HOUR)
        };
        assert!(no_reset.over(NOW, HOUR));
        assert!(!no_reset.over(NOW - HOUR, HOUR));
    }

    #[test]
    fn records_merge_per_account_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let a = |used: f64, seen: i64| Account {
            account: "/h/.claude".into(),
            five_hour: Some(window(used, HOUR, seen)),
            seven_day: None,
        };
        record(dir.path(), &a(30.0, NOW)).unwrap();
        record(dir.path(), &a(20.0, NOW + 1000)).unwrap();
        let other = Account {
            account: "/h/other".into(),
            ..a(90.0, NOW)
        };
        record(dir.path(), &other).unwrap();
        let all = read_all(dir.path());
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].five_hour.unwrap().used_percentage, 30.0);
        assert_eq!(all[1].five_hour.unwrap().used_percentage, 90.0);
        let t = Path::new("/h/other/projects/p/s.jsonl");
        let found = of_account(
            &all,
            crate::agent::Agent::Claude.side().account_of(t).as_deref(),
        )
        .unwrap();
        assert_eq!(found.account, Path::new("/h/other"));
        assert_eq!(of_account(&all[..1], None), None);
        assert_eq!(of_account(&all, Some(Path::new("/elsewhere"))), None);
    }
}
