use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::SystemTime;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::bus::registration::RegistrationStatus;
use crate::config::Config;
use crate::delivery::Deliverer;
use crate::session::{SessionViews, Sessions};
use crate::telemetry::warn::Warnings;

/// What every request handler shares.
pub struct AppState {
    pub config: Config,
    pub deliverer: Arc<Deliverer>,
    /// One WARNING per rejection reason per minute.
    pub rejections: Warnings,
    /// One WARNING per minute for unsafe session ids, whatever the id.
    pub unsafe_ids: Warnings,
    /// Whether the next event without a `signal_level` should be reported at INFO.
    pub level_notice_armed: AtomicBool,
    pub started_at: SystemTime,
    /// Present when registration with the bus is enabled.
    pub registration: Option<Arc<RegistrationStatus>>,
    /// Every session as the session loop last rendered it.
    pub views: watch::Receiver<SessionViews>,
    /// The sessions' table, to ask the loop for a fresh look.
    pub sessions: Arc<Sessions>,
    /// This machine in the fleet, when `[fleet] key_file` is set.
    pub fleet: Option<Arc<crate::fleet::Fleet>>,
    /// Cancelled when the daemon stops: a request that waits (the page's long poll) answers
    /// then, so the graceful shutdown does not wait for it.
    pub stopping: CancellationToken,
}
