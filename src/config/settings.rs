//! The typed shape of `config/default.toml`, one struct per section, with no serde defaults: a key
//! missing from the built-in file fails every resolve instead of taking a second default here.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::duration;

/// Settings as layered by `config::layers`, before validation. Field names are the TOML keys.
#[derive(Debug, Clone, Deserialize)]
pub struct Settings {
    pub bridge: BridgeSettings,
    pub registration: RegistrationSettings,
    pub wake: WakeSettings,
    pub mux: MuxSettings,
    pub ledger: LedgerSettings,
    pub spool: SpoolSettings,
    pub prune: PruneSettings,
    pub state: StateSettings,
    pub context: ContextSettings,
    pub nudger: NudgerSettings,
    pub limits: LimitSettings,
    pub rewind: RewindSettings,
    pub launch: LaunchSettings,
    pub notify: NotifySettings,
    pub schedule: ScheduleSettings,
    pub budget: BudgetSettings,
    pub fleet: FleetSettings,
    pub page: PageSettings,
}

/// `[page]`: the history the page at `/` draws.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PageSettings {
    #[serde(deserialize_with = "duration::deserialize")]
    pub sample_interval: Duration,
    #[serde(deserialize_with = "duration::deserialize")]
    pub history: Duration,
}

/// `[fleet]`: this machine among the others on the bus (validated by `fleet::FleetConfig`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct FleetSettings {
    #[serde(deserialize_with = "trimmed")]
    pub machine: String,
    #[serde(deserialize_with = "trimmed")]
    pub key_file: String,
    /// The verbs other machines may send this one (`fleet::command::Verb`).
    pub accept: Vec<String>,
}

/// `[budget]`: the usage windows and nudging (validated by `budget::policy::validate`). The
/// `Default` is off: nothing else in it is read then.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct BudgetSettings {
    pub enabled: bool,
    /// How close to its reset a window's end is "near".
    #[serde(deserialize_with = "duration::deserialize")]
    pub use_within: Duration,
    /// Below this percentage used, a window near its end is under-used.
    pub use_below: u8,
    /// From this percentage used, a window is nearly spent.
    pub spare_from: u8,
    /// A reading this old without a new one is shown as stale (it still counts: within a window
    /// the used share only grows).
    #[serde(deserialize_with = "duration::deserialize")]
    pub stale_after: Duration,
}

/// `[schedule]`: when wakebridge starts work on its own (validated by `session::hours`).
#[derive(Debug, Clone, Deserialize)]
pub struct ScheduleSettings {
    pub active_hours: String,
    pub active_days: Vec<String>,
}

/// `[notify]`: push messages for a human (validated by `notify::NotifyConfig`).
#[derive(Debug, Clone, Deserialize)]
pub struct NotifySettings {
    pub url: String,
    pub format: String,
    pub bus: bool,
    #[serde(deserialize_with = "duration::deserialize")]
    pub min_gap: Duration,
    pub max_per_hour: u32,
}

/// `[rewind]` (validated by `rewind::message`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RewindSettings {
    pub auto: bool,
    /// Idle time after the checkpoint warning before an automatic rewind.
    #[serde(deserialize_with = "duration::deserialize")]
    pub after: Duration,
    /// Shortest time between two automatic rewinds of one session.
    #[serde(deserialize_with = "duration::deserialize")]
    pub min_gap: Duration,
    pub message: String,
}

/// `[limits]` (validated by `session::SessionConfig`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LimitSettings {
    pub enabled: bool,
    /// Whether the resume message is typed at the reset (else held until it shows life).
    pub resume: bool,
    #[serde(deserialize_with = "duration::deserialize")]
    pub resume_grace: Duration,
    /// After the reset, how long a session's armed auto-continue is left to do it.
    #[serde(deserialize_with = "duration::deserialize")]
    pub auto_continue_wait: Duration,
    pub resume_message: String,
    pub max_tries: u32,
}

#[derive(Debug, Clone, Deserialize)]
pub struct BridgeSettings {
    #[serde(deserialize_with = "text")]
    pub port: String,
    pub backend: String,
    #[serde(deserialize_with = "text")]
    pub cooldown: String,
    #[serde(deserialize_with = "text")]
    pub busy_ttl: String,
    pub wake_dir: String,
    pub bus_url: String,
    pub hook_url: String,
    pub bind: String,
    pub allowed_hosts: Vec<String>,
    /// Trimmed once here, so the daemon, `service install` and `uninstall` read one path.
    #[serde(deserialize_with = "trimmed")]
    pub secret_file: String,
    pub scope: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RegistrationSettings {
    pub enabled: bool,
    #[serde(deserialize_with = "duration::deserialize")]
    pub keep_interval: Duration,
}

#[derive(Debug, Clone, Deserialize)]
pub struct WakeSettings {
    #[serde(deserialize_with = "duration::deserialize")]
    pub owed_after: Duration,
    pub inbox: bool,
    #[serde(default)]
    pub messages: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct MuxSettings {
    pub tmux_bin: String,
    pub zellij_bin: String,
    pub tmux_socket: String,
    pub shells: Vec<String>,
    #[serde(deserialize_with = "duration::deserialize")]
    pub submit_delay: Duration,
}

#[derive(Debug, Clone, Deserialize)]
pub struct LedgerSettings {
    pub path: String,
    #[serde(deserialize_with = "duration::deserialize")]
    pub identity_window: Duration,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SpoolSettings {
    #[serde(deserialize_with = "duration::deserialize")]
    pub sync_interval: Duration,
}

#[derive(Debug, Clone, Deserialize)]
pub struct PruneSettings {
    #[serde(deserialize_with = "duration::deserialize")]
    pub max_age: Duration,
    pub max_total_bytes: u64,
    #[serde(deserialize_with = "duration::deserialize")]
    pub interval: Duration,
}

/// `[nudger]`: the idle nudger (validated into `session::SessionConfig`).
#[derive(Debug, Clone, Deserialize)]
pub struct NudgerSettings {
    pub enabled: bool,
    #[serde(deserialize_with = "duration::deserialize")]
    pub idle_after: Duration,
    #[serde(deserialize_with = "duration::deserialize")]
    pub poll_interval: Duration,
    #[serde(deserialize_with = "duration::deserialize")]
    pub base_cooldown: Duration,
    #[serde(deserialize_with = "duration::deserialize")]
    pub max_cooldown: Duration,
    pub acknowledge_after: u32,
    /// `all` or `agents` (validated into `session::Keep`).
    pub keep: String,
    pub messages: Vec<String>,
}

/// `[launch]`: what `wakebridge launch` starts and how long it waits for the idle prompt.
#[derive(Debug, Clone, Deserialize)]
pub struct LaunchSettings {
    pub command: Vec<String>,
    #[serde(deserialize_with = "duration::deserialize")]
    pub timeout: Duration,
}

#[derive(Debug, Clone, Deserialize)]
pub struct StateSettings {
    pub dir: String,
}

/// `[context]`: each session's context window, followed by the session loop (validated by
/// `context::ContextConfig`).
#[derive(Debug, Clone, Deserialize)]
pub struct ContextSettings {
    pub enabled: bool,
    /// False only monitors.
    pub warnings: bool,
    #[serde(deserialize_with = "duration::deserialize")]
    pub poll_interval: Duration,
    pub default_window: u64,
    #[serde(deserialize_with = "duration::deserialize")]
    pub feed_max_age: Duration,
    /// Empty means off.
    pub latest_state_file: String,
    pub thresholds: ContextThresholdSettings,
    /// Model-id prefix -> context window in tokens, laid over the built-in table.
    #[serde(default)]
    pub models: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ContextThresholdSettings {
    pub wrap_up: ContextLevelSettings,
    pub checkpoint: ContextLevelSettings,
}

/// One warning level: the percentage that triggers it and the text typed (`{pct}` replaced).
#[derive(Debug, Clone, Deserialize)]
pub struct ContextLevelSettings {
    pub percent: f64,
    pub message: String,
}

fn trimmed<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    String::deserialize(deserializer).map(|text| text.trim().to_string())
}

/// A setting the reference's rules check later (a port, seconds), as a number or as text. A
/// visitor, not an untagged enum: that one formats an error for each form it tries first, on
/// every start of every verb (`wakebridge hook` included).
fn text<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    struct Text;
    impl serde::de::Visitor<'_> for Text {
        type Value = String;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("text or a number")
        }
        fn visit_str<E>(self, v: &str) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_i64<E>(self, v: i64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_f64<E>(self, v: f64) -> Result<String, E> {
            Ok(v.to_string())
        }
    }
    deserializer.deserialize_any(Text)
}
