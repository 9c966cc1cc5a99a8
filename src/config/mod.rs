//! Configuration of `wakebridge serve`: the layered settings (built-in defaults from
//! `config/default.toml` < the user's TOML file < environment < flags), their validation, and
//! the network topology rules inherited from the Python bridge (bind derivation, refusals,
//! advisory warnings, Host allowlist). Everything here is pure: it reads an environment and
//! flags handed to it and returns a validated `Config` or one `ConfigError` line.

pub(crate) mod duration;
pub mod hosts;
mod layers;
mod names;
mod topology;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::claude::home::{ClaudeHome, HomeError};
pub use crate::env::Env;
use crate::wire::signature::Secret;
pub use hosts::HostAllowlist;
pub use topology::{Topology, UrlProblem};

/// The built-in defaults: the same file operators read as documentation.
pub const DEFAULT_TOML: &str = include_str!("../../config/default.toml");

/// Every setting at its default, as `config/default.toml` gives it: the one place a default
/// lives. Modules whose settings are not passed in (a unit test, a tool run outside `serve`)
/// start from these instead of keeping their own copies.
pub fn defaults() -> &'static Settings {
    // The file is compiled in and a unit test parses it, so this cannot fail at run time.
    #[allow(clippy::expect_used)]
    static DEFAULTS: std::sync::LazyLock<Settings> = std::sync::LazyLock::new(|| {
        Settings::deserialize(layers::defaults().clone())
            .expect("config/default.toml holds every setting (config::tests checks it parses)")
    });
    &DEFAULTS
}

/// Prefix of wakebridge's own environment variables (`WAKEBRIDGE_<SECTION>__<KEY>`).
const ENV_PREFIX: &str = "WAKEBRIDGE";

/// Why the configuration cannot be used: one line naming what is wrong and how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "--config {}: no such file; give the path of a TOML file (see config/default.toml)",
        path.display()
    )]
    NoFile { path: PathBuf },
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not valid TOML: {}", path.display(), one_line(source))]
    Toml {
        path: PathBuf,
        source: toml::de::Error,
    },
    /// A section of the user's file that is not one of ours; `nearest` is the did-you-mean.
    #[error(
        "{}: unknown section [{section}]{} (config/default.toml lists every section)",
        file.display(), did_you_mean(nearest, "[", "]")
    )]
    UnknownSection {
        file: PathBuf,
        section: String,
        nearest: Option<String>,
    },
    #[error(
        "{}: unknown setting `{setting}`{} (config/default.toml lists every setting)",
        file.display(), did_you_mean(nearest, "`", "`")
    )]
    UnknownSetting {
        file: PathBuf,
        setting: String,
        nearest: Option<String>,
    },
    /// A `WAKEBRIDGE_*` variable that names no setting; `nearest` is the variable meant.
    #[error(
        "environment variable {var} names no setting{} (the form is {}_<SECTION>__<KEY>, \
         for the keys in config/default.toml)",
        did_you_mean(nearest, "", ""),
        ENV_PREFIX
    )]
    UnknownVariable {
        var: String,
        nearest: Option<String>,
    },
    /// The layered table does not fit `Settings` (a wrong type, a bad duration); `file` is the
    /// user's file, if one was read.
    #[error(
        "bad setting in {}: {}; fix the value (every key, its type and default are in \
         config/default.toml; env form WAKEBRIDGE_<SECTION>__<KEY>)",
        file.as_ref().map_or_else(
            || "the environment".to_string(),
            |f| format!("{} or the environment", f.display())
        ),
        one_line(source)
    )]
    BadSetting {
        file: Option<PathBuf>,
        source: toml::de::Error,
    },
    /// A value that cannot be used, as given (`origin` is the flag, variable or key), and what
    /// to give instead.
    #[error("{origin}={value:?} {reason}")]
    BadValue {
        origin: String,
        value: String,
        reason: String,
    },
    /// A wakebridge duration setting that does not parse (`names` lists where it can be set).
    #[error("{origin}: {source} ({names})")]
    Duration {
        origin: String,
        names: String,
        source: duration::DurationError,
    },
    #[error(
        "{origin}={value:?} is not a usable {what}: {problem}; give an http:// or https:// URL \
         with a host name, e.g. http://127.0.0.1:8080/mcp"
    )]
    Url {
        origin: String,
        value: String,
        what: &'static str,
        #[source]
        problem: UrlProblem,
    },
    /// Paths are shared by processes started in many working directories.
    #[error("{origin}={value:?} is relative: give an absolute path ({names})")]
    Relative {
        origin: String,
        value: String,
        names: String,
    },
    #[error(
        "HOME is not an absolute path, so the default wake dir is unknown: set one ({})",
        WAKE_DIR.names()
    )]
    NoHome,
    #[error(
        "no place for wakebridge's state (the ledger, context files): neither XDG_STATE_HOME \
         nor HOME is an absolute directory; set one, or [state] dir (WAKEBRIDGE_STATE__DIR)"
    )]
    NoStateDir,
    #[error(
        "the bus at {bus_url} is remote but the hook URL {hook_url} is loopback: the bus would \
         POST to itself. Set --hook-url / AGENT_EVENT_BUS_BRIDGE_HOOK_URL to an address the bus \
         can reach (and set AGENT_EVENT_BUS_BRIDGE_SECRET)"
    )]
    HookUnreachable { bus_url: String, hook_url: String },
    #[error(
        "the listener is reachable off this machine (bind {bind}, hook URL {hook_url}) but no \
         secret is set: set AGENT_EVENT_BUS_BRIDGE_SECRET to the webhook's shared secret, or \
         bind and advertise loopback only"
    )]
    NoSecret { bind: IpAddr, hook_url: String },
    #[error(
        "allowed host {entry:?} has no hostname: list host names or IP literals, comma-separated \
         (--allowed-hosts / AGENT_EVENT_BUS_BRIDGE_ALLOWED_HOSTS)"
    )]
    EmptyAllowedHost { entry: String },
    #[error(
        "mux.submit_delay = {delay:?} leaves no time to type within the {:?} injection budget: \
         use at most {max:?} (WAKEBRIDGE_MUX__SUBMIT_DELAY)",
        crate::mux::INJECT_BUDGET
    )]
    SubmitDelay { delay: Duration, max: Duration },
    #[error(
        "spool.sync_interval = {0:?} is out of range: use between 10ms and 1h \
         (WAKEBRIDGE_SPOOL__SYNC_INTERVAL)"
    )]
    SyncInterval(Duration),
    /// The text is typed into a prompt, where a control character or a leading digit would do
    /// something else (submit early, pick a menu option).
    #[error(
        "wake.messages.{0} must be one line of printable text that does not start with a digit"
    )]
    WakeMessage(String),
}

/// A parser's message, which may span lines (TOML's caret diagram), as part of one line.
fn one_line(error: &dyn std::fmt::Display) -> String {
    error.to_string().trim_end().replace('\n', " ")
}

/// `; did you mean <nearest>?`, or nothing when no name is close.
fn did_you_mean(nearest: &Option<String>, open: &str, close: &str) -> String {
    nearest
        .as_ref()
        .map(|name| format!("; did you mean {open}{name}{close}?"))
        .unwrap_or_default()
}

/// Which way a delivery ends: appended only, or appended and woken through a multiplexer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Spool,
    Mux,
}

impl Backend {
    /// `tmux` is the reference's legacy alias of `mux`.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "spool" => Some(Self::Spool),
            "mux" | "tmux" => Some(Self::Mux),
            _ => None,
        }
    }
}

/// Which sessions' events this bridge acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    All,
    Local,
}

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
    pub launch: LaunchSettings,
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

/// `[nudger]`: the idle nudger (validated into `nudge::NudgerConfig`).
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

/// `[context]`: the context monitor inside `serve` (validated by `context::task::MonitorConfig`).
#[derive(Debug, Clone, Deserialize)]
pub struct ContextSettings {
    pub enabled: bool,
    /// Type threshold warnings into mapped panes (mux backend only); false only monitors.
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

/// `[context.thresholds]`: the two warning levels.
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

/// A setting validated later by the reference's own rules (a port, seconds), written in the file
/// as a number or as text.
fn text<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Written {
        Text(String),
        Integer(i64),
        Float(f64),
    }
    Ok(match Written::deserialize(deserializer)? {
        Written::Text(text) => text,
        Written::Integer(n) => n.to_string(),
        Written::Float(x) => x.to_string(),
    })
}

/// The reference bridge's flags, as given on the command line (unparsed, so that a bad value is
/// reported in the same words as a bad environment variable and `--help` never depends on them).
#[derive(Debug, Clone, Default)]
pub struct Flags {
    pub config: Option<PathBuf>,
    pub port: Option<String>,
    pub backend: Option<String>,
    pub cooldown: Option<String>,
    pub busy_ttl: Option<String>,
    pub wake_dir: Option<String>,
    pub bus_url: Option<String>,
    pub hook_url: Option<String>,
    pub bind: Option<String>,
    pub allowed_hosts: Option<String>,
}

/// Where each reference setting can come from, in the words an error message should use.
struct Source {
    flag: &'static str,
    env: &'static str,
    key: &'static str,
}

const PORT: Source = Source {
    flag: "--port",
    env: "AGENT_EVENT_BUS_BRIDGE_PORT",
    key: "bridge.port",
};
const BACKEND: Source = Source {
    flag: "--backend",
    env: "AGENT_EVENT_BUS_BRIDGE_BACKEND",
    key: "bridge.backend",
};
const COOLDOWN: Source = Source {
    flag: "--cooldown",
    env: "AGENT_EVENT_BUS_BRIDGE_COOLDOWN",
    key: "bridge.cooldown",
};
const BUSY_TTL: Source = Source {
    flag: "--busy-ttl",
    env: "AGENT_EVENT_BUS_BRIDGE_BUSY_TTL",
    key: "bridge.busy_ttl",
};
const WAKE_DIR: Source = Source {
    flag: "--wake-dir",
    env: "AGENT_EVENT_BUS_WAKE_DIR",
    key: "bridge.wake_dir",
};
const BUS_URL: Source = Source {
    flag: "--bus-url",
    env: "AGENT_EVENT_BUS_URL",
    key: "bridge.bus_url",
};
const HOOK_URL: Source = Source {
    flag: "--hook-url",
    env: "AGENT_EVENT_BUS_BRIDGE_HOOK_URL",
    key: "bridge.hook_url",
};
const BIND: Source = Source {
    flag: "--bind",
    env: "AGENT_EVENT_BUS_BRIDGE_BIND",
    key: "bridge.bind",
};
const ALLOWED_HOSTS: Source = Source {
    flag: "--allowed-hosts",
    env: "AGENT_EVENT_BUS_BRIDGE_ALLOWED_HOSTS",
    key: "bridge.allowed_hosts",
};
/// Env only, so the secret never shows in `ps`.
pub const SECRET_ENV: &str = "AGENT_EVENT_BUS_BRIDGE_SECRET";

impl Source {
    fn names(&self) -> String {
        format!("{} / {} / {}", self.flag, self.env, self.key)
    }
}

/// Every path wakebridge uses, resolved once (defaults < file < env < flags), absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// The Python bridge's wake dir: spools, panes.json, busy markers.
    pub wake_dir: PathBuf,
    /// Context state files and the status-line feed.
    pub state_dir: PathBuf,
    /// The SQLite ledger.
    pub ledger: PathBuf,
    /// The TOML file that was read, if any.
    pub config_file: Option<PathBuf>,
    /// Claude Code's config dir and state file, as Claude Code started in this environment
    /// finds them (or why they are unknown).
    pub claude: Result<ClaudeHome, HomeError>,
}

impl Paths {
    fn resolve(
        flags: &Flags,
        env: &Env,
        settings: &Settings,
        config_file: Option<PathBuf>,
    ) -> Result<Paths, ConfigError> {
        let (wake_s, origin) = pick(&flags.wake_dir, env, &WAKE_DIR, &settings.bridge.wake_dir);
        let wake_dir = match wake_s.trim() {
            "" => home(env)
                .map(|h| h.join(crate::wakedir::dir::DEFAULT_WAKE_DIR_UNDER_HOME))
                .ok_or(ConfigError::NoHome)?,
            set => absolute(set, &origin, &WAKE_DIR.names())?,
        };
        let state_dir = match settings.state.dir.trim() {
            "" => default_state_dir(env).ok_or(ConfigError::NoStateDir)?,
            set => absolute(set, "state.dir", "WAKEBRIDGE_STATE__DIR")?,
        };
        let ledger = match settings.ledger.path.trim() {
            "" => state_dir.join(crate::store::DB_FILE_NAME),
            set => absolute(set, "ledger.path", "WAKEBRIDGE_LEDGER__PATH")?,
        };
        Ok(Paths {
            wake_dir,
            state_dir,
            ledger,
            config_file,
            claude: ClaudeHome::locate(env),
        })
    }
}

/// `$HOME`, when it is an absolute path.
fn home(env: &Env) -> Option<PathBuf> {
    env.absolute_path("HOME")
}

/// A path setting: hooks and the daemon run from many working directories, so only an absolute
/// path means the same file to all of them.
fn absolute(value: &str, origin: &str, names: &str) -> Result<PathBuf, ConfigError> {
    let path = PathBuf::from(value);
    if path.is_absolute() {
        Ok(path)
    } else {
        Err(ConfigError::Relative {
            origin: origin.to_string(),
            value: value.to_string(),
            names: names.to_string(),
        })
    }
}

/// The validated configuration every verb runs with.
#[derive(Debug, Clone)]
pub struct Config {
    pub port: u16,
    pub backend: Backend,
    pub cooldown: Duration,
    /// Seconds; may be infinite (markers never expire).
    pub busy_ttl: f64,
    pub paths: Paths,
    pub bus_url: String,
    pub hook_url: String,
    pub topology: Topology,
    pub secret: Option<Secret>,
    pub scope: Scope,
    pub debug: bool,
    pub settings: Settings,
    /// Advisory warnings found while validating; `serve` logs them at start-up.
    pub warnings: Vec<String>,
}

/// Layers defaults < file < `WAKEBRIDGE_*` env into `Settings`. A key of the file or a
/// `WAKEBRIDGE_*` variable that names no setting is refused (with the nearest valid name).
pub fn load_settings(config_file: Option<&Path>, env: &Env) -> Result<Settings, ConfigError> {
    Ok(load(config_file, env)?.0)
}

/// `load_settings`, and the file that was read (if any).
fn load(config_file: Option<&Path>, env: &Env) -> Result<(Settings, Option<PathBuf>), ConfigError> {
    let user_file = match config_file {
        Some(path) => {
            if !path.is_file() {
                return Err(ConfigError::NoFile {
                    path: path.to_path_buf(),
                });
            }
            Some(path.to_path_buf())
        }
        None => default_config_file(env).filter(|p| p.is_file()),
    };
    let mut table = layers::defaults().clone();
    if let Some(path) = &user_file {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.clone(),
            source,
        })?;
        let file: toml::Table = toml::from_str(&text).map_err(|source| ConfigError::Toml {
            path: path.clone(),
            source,
        })?;
        names::check_file(path, &file)?;
        layers::merge(&mut table, file);
    }
    let vars = env.vars();
    let own: Vec<(&str, &str)> = vars
        .iter()
        .filter(|(k, _)| k.starts_with(ENV_PREFIX) && k[ENV_PREFIX.len()..].starts_with('_'))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    names::check_env(own.iter().map(|(k, _)| *k))?;
    layers::apply_env(&mut table, own)?;
    let settings = Settings::deserialize(table).map_err(|source| ConfigError::BadSetting {
        file: user_file.clone(),
        source,
    })?;
    Ok((settings, user_file))
}

/// `$XDG_CONFIG_HOME/wakebridge/config.toml`, else `~/.config/wakebridge/config.toml`.
pub fn default_config_file(env: &Env) -> Option<PathBuf> {
    let base = env
        .nonempty("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| env.nonempty("HOME").map(|h| Path::new(&h).join(".config")))?;
    Some(base.join("wakebridge").join("config.toml"))
}

/// `$XDG_STATE_HOME/wakebridge`, else `~/.local/state/wakebridge`. Per the XDG spec an empty
/// or relative `XDG_STATE_HOME` is ignored.
fn default_state_dir(env: &Env) -> Option<PathBuf> {
    env.nonempty("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| home(env).map(|h| h.join(".local/state")))
        .map(|dir| dir.join(crate::store::STATE_DIR_NAME))
}

fn bad_value(origin: &str, value: &str, reason: String) -> ConfigError {
    ConfigError::BadValue {
        origin: origin.to_string(),
        value: value.to_string(),
        reason,
    }
}

/// Picks flag > reference env > layered setting, remembering which one for error messages.
fn pick(flag: &Option<String>, env: &Env, source: &Source, layered: &str) -> (String, String) {
    if let Some(v) = flag {
        return (v.clone(), source.flag.to_string());
    }
    if let Some(v) = env.nonempty(source.env) {
        return (v, source.env.to_string());
    }
    (layered.to_string(), source.key.to_string())
}

fn parse_port(value: &str, origin: &str) -> Result<u16, ConfigError> {
    match value.trim().parse::<u32>() {
        Ok(p) if (1..=65535).contains(&p) => Ok(p as u16),
        _ => Err(bad_value(
            origin,
            value,
            format!(
                "is not a port: use an integer from 1 to 65535 ({})",
                PORT.names()
            ),
        )),
    }
}

fn parse_seconds(
    value: &str,
    origin: &str,
    names: &str,
    allow_inf: bool,
) -> Result<f64, ConfigError> {
    let v = value.trim();
    let parsed: Option<f64> = match v.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => Some(f64::INFINITY),
        "nan" | "+nan" | "-nan" => Some(f64::NAN),
        other => other.parse::<f64>().ok(),
    };
    let hint = if allow_inf {
        "a number of seconds >= 0, or inf"
    } else {
        "a finite number of seconds >= 0"
    };
    let refuse = |reason: String| Err(bad_value(origin, value, reason));
    match parsed {
        Some(x) if x.is_nan() => refuse(format!("is NaN: use {hint} ({names})")),
        Some(x) if x < 0.0 => refuse(format!("is negative: use {hint} ({names})")),
        Some(x) if x.is_infinite() && !allow_inf => {
            refuse(format!("is infinite: use {hint} ({names})"))
        }
        Some(x) => Ok(x),
        None => refuse(format!(
            "is not a number: use {hint}, without a unit ({names})"
        )),
    }
}

/// A seconds setting (cooldown, busy TTL): the reference's variables and flags take plain
/// seconds, as the Python bridge does (`30s` is refused there); wakebridge's own settings take
/// any duration form. `inf` is allowed where it means "never expires".
fn seconds_from(
    value: &str,
    origin: &str,
    source: &Source,
    allow_inf: bool,
) -> Result<f64, ConfigError> {
    if origin != source.key {
        return parse_seconds(value, origin, &source.names(), allow_inf);
    }
    let v = value.trim();
    if allow_inf && matches!(v.to_ascii_lowercase().as_str(), "inf" | "+inf" | "infinity") {
        return Ok(f64::INFINITY);
    }
    duration::parse(v)
        .map(|d| d.as_secs_f64())
        .map_err(|e| ConfigError::Duration {
            origin: origin.to_string(),
            names: source.names(),
            source: e,
        })
}

/// Builds and validates the whole configuration.
pub fn resolve(flags: &Flags, env: &Env) -> Result<Config, ConfigError> {
    let (settings, config_file) = load(flags.config.as_deref(), env)?;
    let b = &settings.bridge;

    let (port_s, origin) = pick(&flags.port, env, &PORT, &b.port);
    let port = parse_port(&port_s, &origin)?;

    let (backend_s, origin) = pick(&flags.backend, env, &BACKEND, &b.backend);
    let backend = Backend::parse(backend_s.trim()).ok_or_else(|| {
        bad_value(
            &origin,
            &backend_s,
            format!(
                "is not a backend: use mux (alias tmux) or spool ({})",
                BACKEND.names()
            ),
        )
    })?;

    let (cooldown_s, origin) = pick(&flags.cooldown, env, &COOLDOWN, &b.cooldown);
    let cooldown = Duration::from_secs_f64(seconds_from(&cooldown_s, &origin, &COOLDOWN, false)?);

    let (ttl_s, origin) = pick(&flags.busy_ttl, env, &BUSY_TTL, &b.busy_ttl);
    let busy_ttl = seconds_from(&ttl_s, &origin, &BUSY_TTL, true)?;

    let paths = Paths::resolve(flags, env, &settings, config_file)?;

    let (bus_url, origin) = pick(&flags.bus_url, env, &BUS_URL, &b.bus_url);
    let bus_url = bus_url.trim().to_string();
    let (hook_s, hook_origin) = pick(&flags.hook_url, env, &HOOK_URL, &b.hook_url);
    let hook_url = if hook_s.trim().is_empty() {
        format!("http://127.0.0.1:{port}/hook")
    } else {
        hook_s.trim().to_string()
    };
    let (bind_s, bind_origin) = pick(&flags.bind, env, &BIND, &b.bind);
    let allowed_raw: Vec<String> = match (&flags.allowed_hosts, env.nonempty(ALLOWED_HOSTS.env)) {
        (Some(v), _) => v.split(',').map(str::to_string).collect(),
        (None, Some(v)) => v.split(',').map(str::to_string).collect(),
        (None, None) => b.allowed_hosts.clone(),
    };

    let secret = env
        .get(SECRET_ENV)
        .filter(|s| !s.is_empty())
        .map(Secret::new);

    let topology = topology::derive(topology::Inputs {
        port,
        bus_url: &bus_url,
        bus_origin: &origin,
        hook_url: &hook_url,
        hook_origin: &hook_origin,
        bind: bind_s.trim(),
        bind_origin: &bind_origin,
        allowed_hosts: &allowed_raw,
        has_secret: secret.is_some(),
    })?;

    let scope = match b.scope.trim() {
        "all" => Scope::All,
        "local" => Scope::Local,
        other => {
            return Err(bad_value(
                "bridge.scope",
                other,
                "is not a scope: use \"all\" or \"local\" (WAKEBRIDGE_BRIDGE__SCOPE)".into(),
            ));
        }
    };
    // Typing starts only when the submit delay and one call's floor still fit in the budget.
    let max_delay = crate::mux::INJECT_BUDGET - crate::mux::STEP_FLOOR * 2;
    if settings.mux.submit_delay > max_delay {
        return Err(ConfigError::SubmitDelay {
            delay: settings.mux.submit_delay,
            max: max_delay,
        });
    }
    let sync = settings.spool.sync_interval;
    if sync < Duration::from_millis(10) || sync > Duration::from_secs(3600) {
        return Err(ConfigError::SyncInterval(sync));
    }
    for (name, text) in &settings.wake.messages {
        if text.trim().is_empty()
            || text.chars().any(char::is_control)
            || text.starts_with(|c: char| c.is_ascii_digit())
        {
            return Err(ConfigError::WakeMessage(name.clone()));
        }
    }

    let warnings = topology.warnings.clone();
    Ok(Config {
        port,
        backend,
        cooldown,
        busy_ttl,
        paths,
        bus_url,
        hook_url,
        topology,
        secret,
        scope,
        debug: env.get("DEV_MODE").is_some_and(|v| !v.is_empty()),
        settings,
        warnings,
    })
}

impl Config {
    /// The address the listener binds.
    pub fn bind_addr(&self) -> IpAddr {
        self.topology.bind
    }
}

#[cfg(test)]
mod tests;
