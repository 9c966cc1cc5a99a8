//! `GET /fleet`: this machine's status, and every other machine's newest status whose fleet
//! signature holds, with whether it is online (its heartbeat: unsigned, so it only dates a
//! machine the key vouched for). Ages come from the bus's clock alone (our own
//! heartbeat there against theirs), so neither clock skew nor the bus's time zone matters.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use jiff::civil::DateTime;
use serde_json::{Value, json};

use super::{Fleet, OFFLINE_AFTER, STATUS_EVENT, bus_session, status};
use crate::api::{self, Machine, MachineStatus};

/// Per bus call, for the view and the heartbeat: a healthy bus answers in milliseconds.
pub const CALL_BUDGET: Duration = Duration::from_secs(3);
/// Newest statuses read per view: a few minutes of a busy fleet. Older ones are remembered.
const STATUSES_READ: u32 = 200;

/// What this daemon has seen of the others: each machine's newest verified status, with the
/// bus's time of it; and how many statuses failed their signature.
#[derive(Default)]
pub struct Peers {
    statuses: Mutex<BTreeMap<String, (MachineStatus, DateTime)>>,
    refused: AtomicU64,
    /// The bus ids of the refused ones, so a status read again by the next view is not counted
    /// again (bounded: forgotten past `REFUSED_KEPT`).
    refused_ids: Mutex<HashSet<i64>>,
}

const REFUSED_KEPT: usize = 10_000;

impl Fleet {
    /// The whole fleet, this machine (`own`) first; this machine alone, with why, when the bus
    /// does not answer.
    pub async fn view(&self, own: MachineStatus) -> api::Fleet {
        let this = Machine {
            name: self.config.machine.clone(),
            this: true,
            online: true,
            last_seen: Some(jiff::Timestamp::now()),
            status: Some(own),
        };
        match self.others().await {
            Ok(others) => api::Fleet {
                machines: std::iter::once(this).chain(others).collect(),
                problem: None,
                refused: self.peers.refused.load(Ordering::Relaxed),
            },
            Err(e) => api::Fleet {
                machines: vec![this],
                problem: Some(format!(
                    "the bus did not answer ({e}): showing this machine only"
                )),
                refused: self.peers.refused.load(Ordering::Relaxed),
            },
        }
    }

    async fn others(&self) -> Result<Vec<Machine>, crate::bus::BusError> {
        // Our heartbeat first, so the bus's clock of us is now.
        self.heartbeat().await?;
        let args = json!({"limit": STATUSES_READ, "order": "desc", "event_types": [STATUS_EVENT]});
        let events = self.bus.call_tool("get_events", args).await?;
        self.remember(events["events"].as_array().map_or(&[][..], Vec::as_slice));
        let sessions = self.bus.call_tool("list_sessions", json!({})).await?;
        let heartbeats = heartbeats(sessions.as_array().map_or(&[][..], Vec::as_slice));
        let ours = heartbeats.get(&self.config.machine).copied();
        let statuses = self
            .peers
            .statuses
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default();
        // A machine is one whose status the fleet key signed: anyone on the bus can register
        // a `wakebridge:<name>` session, so a heartbeat alone shows nothing; it only dates one.
        let now = jiff::Timestamp::now();
        Ok((statuses.into_iter())
            .filter(|(name, _)| *name != self.config.machine)
            .map(|(name, (status, published))| {
                let heartbeat = heartbeats.get(&name).copied();
                let seen = heartbeat.max(Some(published));
                let age = ours.zip(seen).map(|(ours, seen)| age(ours, seen));
                Machine {
                    online: heartbeat.is_some() && age.is_some_and(|age| age <= OFFLINE_AFTER),
                    last_seen: age.and_then(|age| now.checked_sub(age).ok()),
                    status: Some(status),
                    this: false,
                    name,
                }
            })
            .collect())
    }

    /// Keeps the newest verified status of each machine from `events` (newest first); counts
    /// the ones whose signature fails.
    fn remember(&self, events: &[Value]) {
        let Ok(mut statuses) = self.peers.statuses.lock() else {
            return;
        };
        for event in events {
            let Some(machine) =
                (event["channel"].as_str()).and_then(|c| c.strip_prefix("wakebridge:status:"))
            else {
                continue;
            };
            if machine == self.config.machine {
                continue;
            }
            let payload = event["payload"].as_str().unwrap_or_default();
            let Some(status) = status::verified(payload, &self.config.key, machine) else {
                let id = event["id"].as_i64().unwrap_or_default();
                if self.peers.note_refused(id) {
                    tracing::warn!(
                        machine,
                        event = id,
                        "fleet: a status whose signature fails was not shown (another key, or forged)"
                    );
                }
                continue;
            };
            let Some(at) = event["timestamp"].as_str().and_then(|t| t.parse().ok()) else {
                continue;
            };
            let newer = statuses
                .get(machine)
                .is_none_or(|(kept, _)| status.at > kept.at);
            if newer {
                statuses.insert(machine.to_owned(), (status, at));
            }
        }
    }
}

impl Peers {
    /// Counts a refused status once, however many views read it again; whether it is new.
    fn note_refused(&self, id: i64) -> bool {
        let Ok(mut seen) = self.refused_ids.lock() else {
            return false;
        };
        if seen.len() >= REFUSED_KEPT {
            seen.clear();
        }
        let fresh = seen.insert(id);
        if fresh {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
        fresh
    }
}

/// Each wakebridge's heartbeat on the bus, by machine (the bus's own naive local time).
fn heartbeats(sessions: &[Value]) -> BTreeMap<String, DateTime> {
    (sessions.iter())
        .filter_map(|s| {
            let id = s["session_id"].as_str()?;
            let machine = id.strip_prefix("wakebridge:")?;
            (bus_session(machine) == id && !machine.contains(':')).then_some(())?;
            let at = s["last_heartbeat"].as_str()?.parse().ok()?;
            Some((machine.to_owned(), at))
        })
        .collect()
}

/// How long before `ours` `theirs` was, both on the bus's clock; never negative.
fn age(ours: DateTime, theirs: DateTime) -> Duration {
    (ours.duration_since(theirs))
        .try_into()
        .unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeats_are_the_wakebridges_own_by_machine() {
        let rows = [
            json!({"session_id": "wakebridge:alpha", "last_heartbeat": "2026-12-06T22:40:01.123456"}),
            json!({"session_id": "wakebridge:status:alpha", "last_heartbeat": "2026-12-06T22:40:01"}),
            json!({"session_id": "0b7a3c1e-agent", "last_heartbeat": "2026-12-06T22:40:01"}),
            json!({"session_id": "wakebridge:beta", "last_heartbeat": "not a time"}),
        ];
        let seen = heartbeats(&rows);
        assert_eq!(seen.keys().collect::<Vec<_>>(), ["alpha"]);
    }

    #[test]
    fn ages_are_differences_on_the_bus_clock() {
        let ours: DateTime = "2026-12-06T22:41:30".parse().unwrap();
        let theirs: DateTime = "2026-12-06T22:40:00".parse().unwrap();
        assert_eq!(age(ours, theirs), Duration::from_secs(90));
        assert_eq!(age(theirs, ours), Duration::ZERO);
    }
}
