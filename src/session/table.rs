//! Every session wakebridge knows, one [`Session`] value each, in the one table the session loop
//! (which decides) and the gate (which tells a session something, from the HTTP routes too)
//! share. Nothing else keeps anything keyed by a session id in memory; the ledger is where the
//! values are made durable. Each access holds the table's lock for a few field changes, never
//! across I/O.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::lock;
use crate::session::state::Session;

#[derive(Debug, Default)]
pub struct Sessions {
    map: Mutex<HashMap<String, Session>>,
    /// Rung by [`Sessions::look_again`].
    changed: tokio::sync::Notify,
}

impl Sessions {
    /// Something changed outside the loop (a bus event became owed, a person unpaused a
    /// session or asked for a rewind, a reader wants views as fresh as the ledger): the loop
    /// looks again at once, not at its next poll.
    pub fn look_again(&self) {
        self.changed.notify_one();
    }

    /// Resolves once [`Sessions::look_again`] was asked since the loop last waited.
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Changes `sid`'s value, a fresh one if it had none.
    pub fn with<T>(&self, sid: &str, change: impl FnOnce(&mut Session) -> T) -> T {
        let mut map = lock(&self.map);
        match map.get_mut(sid) {
            Some(session) => change(session),
            None => change(map.entry(sid.to_owned()).or_default()),
        }
    }

    /// Reads `sid`'s value; `None` when it has none.
    pub fn read<T>(&self, sid: &str, look: impl FnOnce(&Session) -> T) -> Option<T> {
        lock(&self.map).get(sid).map(look)
    }

    /// Keeps the sessions `keep` says yes to.
    pub fn retain(&self, mut keep: impl FnMut(&str, &mut Session) -> bool) {
        lock(&self.map).retain(|sid, session| keep(sid, session));
    }

    /// What `look` makes of every session, in the order of their ids.
    pub fn each<T>(&self, mut look: impl FnMut(&str, &Session) -> Option<T>) -> Vec<T> {
        let map = lock(&self.map);
        let mut ids: Vec<&String> = map.keys().collect();
        ids.sort();
        ids.into_iter()
            .filter_map(|sid| look(sid, &map[sid]))
            .collect()
    }
}
