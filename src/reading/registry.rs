//! A live session as its agent lists it (Claude Code's `<config>/sessions/<pid>.json`; an agent
//! that lists none makes its sessions known by their hooks): its status, and the inbox it
//! announces there.

use std::collections::HashMap;

use super::inbox::Inbox;

/// What the session is doing, as listed.
#[derive(Debug, Clone, PartialEq, Eq, strum::EnumString)]
#[strum(serialize_all = "lowercase")]
pub enum RegistryStatus {
    Busy,
    Idle,
    /// A dialog, permission prompt or question is open.
    Waiting,
    #[strum(default)]
    Other(String),
}

/// A session's entry in the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryReading {
    pub status: RegistryStatus,
    /// `statusUpdatedAt`, unix ms.
    pub updated_ms: Option<i64>,
    /// Its inbox (`messagingSocketPath`, with the entry's pid; no token): the second source,
    /// after the hooks, for sessions whose hooks are not wired.
    pub inbox: Option<Inbox>,
}

/// An agent's list of its live sessions, as the session loop and the gate ask it.
pub trait SessionList: Send + Sync {
    /// Every live session listed, by id; why the list could not be read.
    fn read(&self) -> Result<HashMap<String, RegistryReading>, String>;
    /// The inbox the live session `sid` is listed with.
    fn inbox_of(&self, sid: &str) -> Option<Inbox>;
    /// The session the process `pid` runs, as listed.
    fn session_of_pid(&self, pid: u32) -> Option<String>;
}
