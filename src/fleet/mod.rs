//! The fleet: every machine's wakebridge on one agent-event-bus, each showing the others'
//! sessions and taking their commands. With `[fleet] key_file` set the daemon registers itself
//! on the bus as `wakebridge:<machine>` (re-registering is its heartbeat, so a bus that forgot it
//! learns it again), publishes this machine's compact status sealed with the fleet key on
//! `wakebridge:status:<machine>` on a change (at most every 15 s) and every 10 minutes,
//! assembles `GET /fleet` from the bus's sessions and the statuses whose signature holds, and
//! runs the commands other machines send it (`command`). The bus is trusted with nothing: the
//! key never goes there, and what it hands over unsigned or signed with another key is counted
//! and not used.

pub mod command;
pub mod seal;
pub mod status;
pub mod view;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::bus::registration::RegistrationStatus;
use crate::bus::{BusClient, BusError};
use crate::config::FleetSettings;
use crate::config::secret::{self, SecretFileError, SecretOf};
use crate::session::SessionViews;
use crate::store::Store;
use crate::wire::signature::Secret;
use command::{Performer, Verb};

/// How often the daemon refreshes its heartbeat on the bus, well inside `OFFLINE_AFTER` (or
/// the keep interval, when shorter): by turns by registering again, so a bus that forgot it
/// learns it again, and by reading its command channel since its last read (the commands the
/// webhook missed), which refreshes the reader's heartbeat too: the read costs no call of its own.
pub const HEARTBEAT: Duration = Duration::from_secs(30);
/// Every this many heartbeats the daemon reads its own status channel for a twin (another
/// daemon under its name): every 4 minutes, a quarter of a call a minute.
const TWIN_CHECK_EVERY: u32 = 8;
/// A machine whose heartbeat is older than this, by the bus's clock, is offline.
pub const OFFLINE_AFTER: Duration = Duration::from_secs(90);
/// The least time between two statuses of a machine that keeps changing.
pub const CHANGE_GAP: Duration = Duration::from_secs(15);
/// A status is published this often even when nothing changed.
pub const REPUBLISH: Duration = Duration::from_secs(600);
/// The bus's event type of a machine's status.
pub const STATUS_EVENT: &str = "wakebridge_status";

const FLEET_KEY: SecretOf = SecretOf {
    setting: "fleet.key_file",
    var: "WAKEBRIDGE_FLEET__KEY_FILE",
    holds: "the fleet's shared key (the same on every machine, not the bridge secret)",
};

/// The bus session (and client id) a machine's daemon registers as. The `:` keeps bridges from
/// spooling direct messages to it as to an agent's session.
pub fn bus_session(machine: &str) -> String {
    format!("wakebridge:{machine}")
}

/// Where the bus posts this machine's commands: `/fleet/hook` beside the bridge's `/hook`.
pub fn webhook_url(hook_url: &str) -> String {
    let joined = url::Url::parse(hook_url).and_then(|hook| hook.join("fleet/hook"));
    joined.map_or_else(|_| format!("{hook_url}/fleet/hook"), String::from)
}

pub fn status_channel(machine: &str) -> String {
    format!("wakebridge:status:{machine}")
}

#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error(transparent)]
    Key(#[from] SecretFileError),
    #[error(
        "fleet.machine {0:?} is not a machine name: use letters, digits, '.', '-' and '_', at \
         most 64 (WAKEBRIDGE_FLEET__MACHINE), or leave it empty for the host name"
    )]
    Machine(String),
    #[error(
        "fleet.key_file {0:?} is not an absolute path: give the key file's full path \
         (WAKEBRIDGE_FLEET__KEY_FILE)"
    )]
    Relative(String),
    #[error(
        "fleet.accept lists {0:?}, which is not a verb: use \"wake\", \"pause\", \"unpause\" \
         or \"rewind\""
    )]
    Verb(String),
    #[error(
        "fleet.key_file holds the bridge secret: the bus sees that secret with every webhook \
         registration, so anyone on the bus could sign commands; make the fleet a key of its own \
         (head -c 32 /dev/urandom | base64 > the key file)"
    )]
    BridgeSecret,
}

/// `[fleet]`, validated: `None` without a key.
#[derive(Debug, Clone)]
pub struct FleetConfig {
    pub machine: String,
    pub key: Secret,
    /// The verbs other machines may send this one.
    pub accept: Vec<Verb>,
}

impl FleetConfig {
    /// `bridge_secret`: the webhook secret, which the fleet key must not be.
    pub fn from_settings(
        settings: &FleetSettings,
        bridge_secret: Option<&Secret>,
    ) -> Result<Option<FleetConfig>, FleetError> {
        if settings.key_file.is_empty() {
            return Ok(None);
        }
        let path = std::path::Path::new(&settings.key_file);
        if !path.is_absolute() {
            return Err(FleetError::Relative(settings.key_file.clone()));
        }
        let key = secret::read(path, FLEET_KEY)?;
        if bridge_secret.is_some_and(|bridge| bridge.expose() == key.expose()) {
            return Err(FleetError::BridgeSecret);
        }
        let machine = match settings.machine.as_str() {
            "" => host_name(),
            named => named.to_owned(),
        };
        if !machine_name_ok(&machine) {
            return Err(FleetError::Machine(machine));
        }
        let accept = (settings.accept.iter())
            .map(|verb| verb.parse().map_err(|_| FleetError::Verb(verb.clone())))
            .collect::<Result<_, _>>()?;
        Ok(Some(FleetConfig {
            machine,
            key,
            accept,
        }))
    }
}

fn machine_name_ok(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// The host name, as the bus's own default `machine` is; "localhost" where it cannot be read.
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]);
    // A host name with characters a machine name refuses keeps the rest.
    let name: String = (name.chars())
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .take(64)
        .collect();
    if rc != 0 || name.is_empty() {
        "localhost".to_owned()
    } else {
        name
    }
}

/// This machine in the fleet: its settings, the bus, what it has seen of the others, and how
/// it runs their commands.
pub struct Fleet {
    pub config: FleetConfig,
    bus: BusClient,
    peers: view::Peers,
    /// Where the ids of the commands run are kept.
    store: Store,
    /// Set once the daemon's routes exist (`set_performer`).
    performer: OnceLock<Performer>,
    taken: command::Taken,
    /// Refusals are logged once a window per why.
    refusals_logged: crate::telemetry::warn::Warnings,
    /// The fleet webhook's row on the bus, as its keeper last saw it.
    pub webhook: Arc<RegistrationStatus>,
    /// Whether the last heartbeat was answered, and when the status last went out.
    on_bus: AtomicBool,
    /// A registration found the bus did not know this machine: its status goes out again.
    forgotten: AtomicBool,
    published_at: Mutex<Option<jiff::Timestamp>>,
}

impl Fleet {
    pub fn new(config: FleetConfig, bus_url: &str, store: Store) -> Result<Arc<Fleet>, BusError> {
        let bus = BusClient::with_timeout(bus_url, view::CALL_BUDGET)?;
        Ok(Arc::new(Fleet {
            config,
            bus,
            peers: view::Peers::new(),
            store,
            performer: OnceLock::new(),
            taken: command::Taken::default(),
            refusals_logged: crate::telemetry::warn::Warnings::default(),
            webhook: Arc::default(),
            on_bus: AtomicBool::new(false),
            forgotten: AtomicBool::new(false),
            published_at: Mutex::new(None),
        }))
    }

    /// This machine on the bus, for `/health` (`webhook`: the keeper's last look, if any).
    pub fn health(&self, webhook: Option<bool>) -> crate::api::FleetHealth {
        crate::api::FleetHealth {
            machine: self.config.machine.clone(),
            on_bus: self.on_bus.load(Ordering::Relaxed),
            webhook,
            published_at: *crate::lock(&self.published_at),
        }
    }

    /// How this machine runs a verb another machine sent; set once, at start.
    pub fn set_performer(&self, performer: Performer) {
        let _ = self.performer.set(performer);
    }

    /// Registers (or re-registers) this machine's daemon on the bus: its heartbeat.
    async fn heartbeat(&self) -> Result<(), BusError> {
        let name = bus_session(&self.config.machine);
        let args = json!({"name": name, "machine": self.config.machine, "cwd": "/",
                          "client_id": name});
        let answer = self.bus.call_tool("register_session", args).await;
        self.on_bus.store(answer.is_ok(), Ordering::Relaxed);
        // A bus that did not know us (restarted on a fresh database) has no status of ours.
        if answer.as_ref().is_ok_and(|a| a["resumed"] == false) {
            self.forgotten.store(true, Ordering::Relaxed);
            *crate::lock(&self.peers.read_to) = None;
        }
        answer.map(drop)
    }

    async fn publish(&self, status: &crate::api::MachineStatus) -> Result<(), BusError> {
        self.peers.publishing(status.at);
        let machine = &self.config.machine;
        let args = json!({
            "event_type": STATUS_EVENT,
            "payload": seal::seal(STATUS_EVENT, status, &self.config.key),
            "session_id": bus_session(machine),
            "channel": status_channel(machine),
            "signal_level": "info",
        });
        self.bus.call_tool("publish_event", args).await?;
        *crate::lock(&self.published_at) = Some(status.at);
        Ok(())
    }
}

/// What `run` needs to make this machine's status.
pub struct Sources {
    pub views: watch::Receiver<SessionViews>,
    pub state_dir: std::path::PathBuf,
    pub budget_stale_after: Duration,
    /// How often, at most, the commands are read for what the webhook missed (the keep
    /// interval; every other heartbeat when that is longer).
    pub catch_up_every: Duration,
}

/// Keeps this machine on the bus: the heartbeat every `HEARTBEAT`, the status on a change and
/// every `REPUBLISH`, no two tries within `CHANGE_GAP`. A failed call is warned once until one
/// works again, and the status is published again once the bus answers: nothing queues
/// meanwhile but the one newest status.
pub async fn run(fleet: Arc<Fleet>, mut sources: Sources, shutdown: CancellationToken) {
    use tokio::time::Instant;
    let name = bus_session(&fleet.config.machine);
    tracing::info!(machine = %fleet.config.machine, "fleet: on the bus as {name}");
    let mut heartbeat = tokio::time::interval(HEARTBEAT.min(sources.catch_up_every));
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Where the fleet's events were read to; `None` until the first read (at start).
    let mut read_to: Option<String> = None;
    // The status the bus has (as far as we know), when it was published, and the last try.
    let mut published: Option<(crate::api::MachineStatus, Instant)> = None;
    let mut tried_at: Option<Instant> = None;
    let mut beats: u32 = 0;
    let mut troubled = false;
    let mut report = |result: Result<(), BusError>, what: &str| match result {
        Ok(()) => {
            if std::mem::take(&mut troubled) {
                tracing::info!("fleet: the bus answers again");
            }
            true
        }
        Err(e) => {
            if !std::mem::replace(&mut troubled, true) {
                tracing::warn!(error = %e, "fleet: could not {what}; retrying meanwhile, this machine's own work goes on");
            }
            false
        }
    };
    // A status is due but waits out the gap after the last try (the loop goes on meanwhile).
    let mut waiting = false;
    loop {
        let republish_at = published.as_ref().map(|(_, at)| *at + REPUBLISH);
        let gap_over = tried_at.map(|at| at + CHANGE_GAP);
        let status_at = if waiting { gap_over } else { republish_at };
        // In this order: at start the heartbeat's first tick and a change of the views are both
        // ready, and an unbiased select could publish the first status before the start's read
        // of the command channel, whose commands are then taken as from before this start.
        tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            _ = heartbeat.tick() => {
                // At start both, then by turns.
                let start = beats == 0;
                if (start || beats.is_multiple_of(2))
                    && !report(fleet.heartbeat().await, "register on the bus")
                {
                    // The bus may come back without the last status: publish it again then.
                    published = None;
                }
                // A bus that did not know us has no status of ours, and its event ids began
                // again: read its command channel from the start.
                if fleet.forgotten.swap(false, Ordering::Relaxed) {
                    published = None;
                    read_to = None;
                }
                if beats.is_multiple_of(TWIN_CHECK_EVERY) {
                    fleet.look_for_twin().await;
                }
                if start || !beats.is_multiple_of(2) {
                    let read = fleet.catch_up(read_to.clone()).await;
                    read_to = read.as_ref().ok().cloned().or(read_to);
                    report(read.map(drop), "read the fleet's commands");
                }
                beats = beats.wrapping_add(1);
            }
            changed = sources.views.changed() => if changed.is_err() { break },
            () = sleep_until_some(status_at) => {}
        }
        let status = own_status(&fleet.config.machine, &mut sources).await;
        let due = published.as_ref().is_none_or(|(last, at)| {
            !status::same(last, &status) || Instant::now() >= *at + REPUBLISH
        });
        // A change soon after the last try waits out the gap, and goes as it is then.
        waiting = due && gap_over.is_some_and(|at| at > Instant::now());
        if !due || waiting {
            continue;
        }
        let now = Instant::now();
        tried_at = Some(now);
        if report(
            fleet.publish(&status).await,
            "publish this machine's status",
        ) {
            published = Some((status, now));
        }
    }
    // Leave the bus's list at once rather than read as offline in 90 s.
    let _ = fleet
        .bus
        .call_tool("unregister_session", json!({"session_id": name}))
        .await;
}

async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// This machine's status from the loop's views and the accounts' windows.
async fn own_status(machine: &str, sources: &mut Sources) -> crate::api::MachineStatus {
    let stale = crate::clock::duration_ms(sources.budget_stale_after);
    let state_dir = sources.state_dir.clone();
    let budgets = tokio::task::spawn_blocking(move || {
        crate::budget::shown(&state_dir, stale, crate::clock::now_ms())
    })
    .await
    .unwrap_or_default();
    status::of(machine, &sources.views.borrow_and_update(), &budgets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_names_are_plain() {
        assert!(machine_name_ok("build-box.local"));
        assert!(machine_name_ok("a_1"));
        for bad in ["", "has space", "colon:in", "slash/in", &"x".repeat(65)] {
            assert!(!machine_name_ok(bad), "{bad:?}");
        }
        assert!(machine_name_ok(&host_name()));
    }

    #[test]
    fn no_key_is_no_fleet_and_a_relative_key_is_refused() {
        let none = FleetSettings::default();
        assert!(FleetConfig::from_settings(&none, None).unwrap().is_none());
        let relative = FleetSettings {
            key_file: "fleet.key".into(),
            ..FleetSettings::default()
        };
        let e = FleetConfig::from_settings(&relative, None).unwrap_err();
        assert!(e.to_string().contains("WAKEBRIDGE_FLEET__KEY_FILE"), "{e}");
    }
}
