use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::SystemTime;

use tokio::sync::watch;

use crate::bus::registration::RegistrationStatus;
use crate::config::Config;
use crate::context::monitor::ContextView;
use crate::delivery::Deliverer;
use crate::session::SessionViews;
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
    /// Context figures per session, kept by the context monitor (empty when it is off).
    pub context: Arc<ContextView>,
    /// The idle nudger's per-session view (absent when it is off).
    pub nudges: Option<watch::Receiver<SessionViews>>,
}
