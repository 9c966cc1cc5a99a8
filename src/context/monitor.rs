//! The pure side of the context monitor task: the view `/sessions` reads, when a state file is
//! worth rewriting and which sessions to follow.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Mutex;

use crate::api;
use crate::lock;

/// Every followed session's status; written by the monitor task, read by handlers.
#[derive(Debug, Default)]
pub struct ContextView {
    sessions: Mutex<HashMap<String, api::Context>>,
}

impl ContextView {
    pub fn status(&self, session_id: &str) -> Option<api::Context> {
        lock(&self.sessions).get(session_id).cloned()
    }

    pub fn set(&self, session_id: &str, status: api::Context) {
        lock(&self.sessions).insert(session_id.to_owned(), status);
    }

    /// Forgets every session `keep` rejects.
    pub fn retain(&self, mut keep: impl FnMut(&str) -> bool) {
        lock(&self.sessions).retain(|sid, _| keep(sid));
    }
}

/// What a state file last said: the whole percent and the minute it was written in. It is
/// rewritten only when this changes, so a busy transcript costs at most a write a minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateStamp {
    pub pct: u32,
    pub minute: u64,
}

impl StateStamp {
    pub fn of(percent: f64, unix_seconds: u64) -> Self {
        Self {
            pct: super::window::whole_percent(percent).unwrap_or(0),
            minute: unix_seconds / 60,
        }
    }
}

/// A session worth following, with the transcript path the hook reported, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub session_id: String,
    pub transcript_hint: Option<PathBuf>,
    /// Wall-clock unix ms of the hook's last report (mapped-only sessions have none).
    pub last_seen_ms: Option<i64>,
}

/// Ledger sessions seen since `seen_since_ms` plus every mapped session, at most `cap`: mapped
/// ones first, then the most recently seen. Ids that cannot name a file are dropped.
pub fn select_sessions(
    ledger: impl IntoIterator<Item = Candidate>,
    mapped: impl IntoIterator<Item = String>,
    seen_since_ms: i64,
    cap: usize,
) -> Vec<Candidate> {
    let mut by_id: BTreeMap<String, (bool, Candidate)> = BTreeMap::new();
    for session_id in mapped {
        let candidate = Candidate {
            session_id: session_id.clone(),
            transcript_hint: None,
            last_seen_ms: None,
        };
        by_id.insert(session_id, (true, candidate));
    }
    for c in ledger {
        let recent = c.last_seen_ms.is_some_and(|t| t >= seen_since_ms);
        match by_id.get_mut(&c.session_id) {
            Some((_, existing)) => *existing = c,
            None if recent => {
                by_id.insert(c.session_id.clone(), (false, c));
            }
            None => {}
        }
    }
    let mut all: Vec<(bool, Candidate)> = by_id
        .into_values()
        .filter(|(_, c)| crate::wire::session_id::SessionId::is_valid(&c.session_id))
        .collect();
    all.sort_by(|(am, a), (bm, b)| {
        bm.cmp(am)
            .then(b.last_seen_ms.cmp(&a.last_seen_ms))
            .then(a.session_id.cmp(&b.session_id))
    });
    all.truncate(cap);
    all.into_iter().map(|(_, c)| c).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_file_rewritten_only_on_new_percent_or_minute() {
        let first = StateStamp::of(42.4, 120);
        assert_eq!(first, StateStamp::of(41.6, 179));
        assert_ne!(first, StateStamp::of(42.0, 180));
        assert_ne!(first, StateStamp::of(43.0, 121));
        assert_eq!(StateStamp::of(f64::NAN, 0).pct, 0);
    }

    fn cand(sid: &str, seen: Option<i64>, hint: Option<&str>) -> Candidate {
        Candidate {
            session_id: sid.into(),
            transcript_hint: hint.map(PathBuf::from),
            last_seen_ms: seen,
        }
    }

    #[test]
    fn follows_mapped_and_recent_sessions_within_cap() {
        let ledger = vec![
            cand("old", Some(10), Some("/o.jsonl")),
            cand("new", Some(500), Some("/n.jsonl")),
            cand("mapped", Some(5), Some("/m.jsonl")),
            cand("bad/id", Some(900), None),
        ];
        let mapped = vec!["mapped".to_string(), "pane-only".to_string()];
        let got = select_sessions(ledger.clone(), mapped.clone(), 100, 10);
        let ids: Vec<&str> = got.iter().map(|c| c.session_id.as_str()).collect();
        assert_eq!(ids, ["mapped", "pane-only", "new"]);
        assert_eq!(got[0].transcript_hint, Some(PathBuf::from("/m.jsonl")));
        let capped = select_sessions(ledger, mapped, 100, 1);
        assert_eq!(capped.len(), 1);
    }
}
