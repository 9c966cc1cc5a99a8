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
/// Statuses read per call: the first view reads the newest this many (a few minutes of a busy
/// fleet); later views, what came since, this many a page, at most `STATUS_PAGES` pages.
const STATUSES_READ: u32 = 200;
const STATUS_PAGES: usize = 5;

/// What this daemon has seen of the others: each machine's newest verified status, with the
/// bus's time of it; how many statuses failed their signature; and whether another daemon
/// publishes under this machine's name.
#[derive(Default)]
pub struct Peers {
    statuses: Mutex<BTreeMap<String, (MachineStatus, DateTime)>>,
    /// Where the statuses were read to; `None`: the newest few next time (and after a bus that
    /// forgot us, whose ids began again).
    pub(super) read_to: Mutex<Option<String>>,
    refused: AtomicU64,
    /// The bus ids of the refused ones, so a status read again by the next view is not counted
    /// again (bounded: forgotten past `REFUSED_KEPT`).
    refused_ids: Mutex<HashSet<i64>>,
    /// When each status this daemon published was made, newest last (a few), to tell its own
    /// statuses from another daemon's under the same name.
    ours: Mutex<std::collections::VecDeque<jiff::Timestamp>>,
    /// When a status under this machine's name that this daemon did not publish was last read.
    twin_seen: Mutex<Option<std::time::Instant>>,
    started: jiff::Timestamp,
}

/// Statuses of our own remembered, to recognise them on the bus: a few minutes' worth.
const OURS_KEPT: usize = 32;
/// A twin is reported this long after its last status was read (it republishes every 10 min).
const TWIN_REPORTED_FOR: Duration = Duration::from_secs(15 * 60);

const REFUSED_KEPT: usize = 10_000;

impl Fleet {
    /// The whole fleet, this machine (`own`) first; this machine alone, with why, when the bus
    /// does not answer.
    pub async fn view(&self, own: MachineStatus) -> api::Fleet {
        let this = this_machine(own);
        match self.others().await {
            Ok(others) => api::Fleet {
                machines: std::iter::once(this).chain(others).collect(),
                problem: self.peers.twin(&self.config.machine),
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

    pub(super) async fn others(&self) -> Result<Vec<Machine>, crate::bus::BusError> {
        // Our heartbeat first, so the bus's clock of us is now.
        self.heartbeat().await?;
        self.read_statuses().await?;
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

    /// Reads the statuses published since the last read (the newest `STATUSES_READ` the first
    /// time), at most `STATUS_PAGES` pages: a view costs what changed, not the fleet's size.
    async fn read_statuses(&self) -> Result<(), crate::bus::BusError> {
        let mut cursor = crate::lock(&self.peers.read_to).clone();
        for _ in 0..STATUS_PAGES {
            let order = if cursor.is_some() { "asc" } else { "desc" };
            let args = json!({"limit": STATUSES_READ, "order": order, "cursor": cursor,
                              "event_types": [STATUS_EVENT]});
            let page = self.bus.call_tool("get_events", args).await?;
            let Some(events) = page["events"].as_array() else {
                let why = format!("no events in {page}");
                return Err(crate::bus::BusError::unusable("get_events", why));
            };
            self.remember(events);
            let next = (page["next_cursor"].as_str().map(str::to_owned)).or(cursor.clone());
            let more = order == "asc" && page["has_more"] == true && next != cursor;
            cursor = next;
            if !more {
                break;
            }
        }
        *crate::lock(&self.peers.read_to) = cursor;
        Ok(())
    }

    /// Reads this machine's own channel for statuses another daemon published under its name
    /// (warned in `remember`); a bus that does not answer is the heartbeat's to report.
    pub(super) async fn look_for_twin(&self) {
        let args = json!({"limit": 5, "order": "desc", "event_types": [STATUS_EVENT],
                          "channel": super::status_channel(&self.config.machine)});
        if let Ok(events) = self.bus.call_tool("get_events", args).await {
            self.remember(events["events"].as_array().map_or(&[][..], Vec::as_slice));
        }
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
            let payload = event["payload"].as_str().unwrap_or_default();
            if machine == self.config.machine {
                self.peers.look_for_twin(payload, &self.config.key, machine);
                continue;
            }
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
    pub fn new() -> Peers {
        Peers {
            started: jiff::Timestamp::now(),
            ..Peers::default()
        }
    }

    /// Notes a status this daemon is about to publish.
    pub(super) fn publishing(&self, at: jiff::Timestamp) {
        if let Ok(mut ours) = self.ours.lock() {
            if ours.len() >= OURS_KEPT {
                ours.pop_front();
            }
            ours.push_back(at);
        }
    }

    /// A status on this machine's own channel, signed with the key, that this daemon did not
    /// publish and that was made since it started: another daemon claims the name. (A twin that
    /// started first is seen at its next status: on a change, or within 10 minutes.)
    fn look_for_twin(&self, payload: &str, key: &crate::wire::signature::Secret, machine: &str) {
        let Some(status) = status::verified(payload, key, machine) else {
            return;
        };
        // One made before this daemon started is its own earlier run's.
        let ours = self.ours.lock().is_ok_and(|ours| ours.contains(&status.at));
        if ours || status.at < self.started {
            return;
        }
        let Ok(mut seen) = self.twin_seen.lock() else {
            return;
        };
        if seen.is_none_or(|at| at.elapsed() > TWIN_REPORTED_FOR) {
            tracing::warn!(
                machine,
                "fleet: another wakebridge publishes as {machine}: give each machine its own [fleet] machine (WAKEBRIDGE_FLEET__MACHINE)"
            );
        }
        *seen = Some(std::time::Instant::now());
    }

    /// Why this machine's name is in doubt, while it is.
    fn twin(&self, machine: &str) -> Option<String> {
        let seen = (*self.twin_seen.lock().ok()?)?;
        (seen.elapsed() <= TWIN_REPORTED_FOR).then(|| {
            format!(
                "another wakebridge publishes as {machine}: give each machine its own [fleet] \
                 machine (WAKEBRIDGE_FLEET__MACHINE)"
            )
        })
    }

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

/// This machine as its own view shows it: online, seen now, with its fresh status.
pub fn this_machine(own: MachineStatus) -> Machine {
    Machine {
        name: own.machine.clone(),
        this: true,
        online: true,
        last_seen: Some(jiff::Timestamp::now()),
        status: Some(own),
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
