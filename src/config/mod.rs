//! Configuration of `serve`: defaults (`config/default.toml`) < the user's TOML file < environment
//! < flags, validated into a `Config`, with the Python bridge's network rules. Pure: it reads the
//! environment and flags handed to it.

pub(crate) mod duration;
mod error;
pub mod explain;
pub mod hosts;
mod layers;
mod names;
pub mod secret;
mod settings;
mod topology;

use std::num::NonZeroU16;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::claude::home::{ClaudeHome, HomeError};
pub use crate::env::Env;
use crate::wire::signature::Secret;
pub use error::ConfigError;
pub use hosts::HostAllowlist;
pub use settings::{
    BridgeSettings, BudgetSettings, ContextLevelSettings, ContextSettings,
    ContextThresholdSettings, FleetSettings, LaunchSettings, LedgerSettings, LimitSettings,
    MuxSettings, NotifySettings, NudgerSettings, PruneSettings, RegistrationSettings,
    RewindSettings, Settings, SpoolSettings, StateSettings, WakeSettings,
};
pub use topology::{Topology, UrlProblem};

pub const DEFAULT_TOML: &str = include_str!("../../config/default.toml");

/// Every setting at its default (`config/default.toml`, the one place a default lives).
pub fn defaults() -> &'static Settings {
    #[allow(clippy::expect_used)]
    static DEFAULTS: std::sync::LazyLock<Settings> = std::sync::LazyLock::new(|| {
        Settings::deserialize(layers::defaults().clone())
            .expect("config/default.toml holds every setting (config::tests checks it parses)")
    });
    &DEFAULTS
}

/// `WAKEBRIDGE_<SECTION>__<KEY>`.
const ENV_PREFIX: &str = "WAKEBRIDGE";

/// Which way a delivery ends: appended only, or appended and woken through a multiplexer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::EnumString, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
pub enum Backend {
    Spool,
    /// `tmux` is the reference's legacy alias of `mux`.
    #[strum(to_string = "mux", serialize = "tmux")]
    Mux,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::EnumString)]
#[strum(serialize_all = "lowercase")]
pub enum Scope {
    All,
    Local,
}

/// The reference bridge's flags (`wakebridge serve`), as given on the command line: unparsed, so
/// that a bad value is reported in the same words as a bad environment variable and `--help`
/// never depends on them. `config` is the global `--config`, set by the dispatcher.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct Flags {
    #[arg(skip)]
    pub config: Option<PathBuf>,
    /// Listener port [env: AGENT_EVENT_BUS_BRIDGE_PORT] [default: 8082]
    #[arg(long)]
    pub port: Option<String>,
    /// mux (alias tmux) or spool [env: AGENT_EVENT_BUS_BRIDGE_BACKEND] [default: mux]
    #[arg(long)]
    pub backend: Option<String>,
    /// Seconds between wakes of one session [env: AGENT_EVENT_BUS_BRIDGE_COOLDOWN] [default: 30]
    #[arg(long)]
    pub cooldown: Option<String>,
    /// Seconds a busy marker stays fresh; 0 ignores markers, inf never expires [env: AGENT_EVENT_BUS_BRIDGE_BUSY_TTL] [default: 3600]
    #[arg(long = "busy-ttl")]
    pub busy_ttl: Option<String>,
    /// Wake dir [env: AGENT_EVENT_BUS_WAKE_DIR] [default: ~/.claude/contrib/agent-event-bus/wake]
    #[arg(long = "wake-dir")]
    pub wake_dir: Option<String>,
    /// The bus's MCP URL [env: AGENT_EVENT_BUS_URL] [default: http://127.0.0.1:8080/mcp]
    #[arg(long = "bus-url")]
    pub bus_url: Option<String>,
    /// URL the bus POSTs to [env: AGENT_EVENT_BUS_BRIDGE_HOOK_URL] [default: http://127.0.0.1:PORT/hook]
    #[arg(long = "hook-url")]
    pub hook_url: Option<String>,
    /// Listen address, an IP or localhost [env: AGENT_EVENT_BUS_BRIDGE_BIND] [default: derived from the hook URL]
    #[arg(long)]
    pub bind: Option<String>,
    /// Extra Host values to accept, comma-separated [env: AGENT_EVENT_BUS_BRIDGE_ALLOWED_HOSTS]
    #[arg(long = "allowed-hosts")]
    pub allowed_hosts: Option<String>,
}

/// Where a reference setting can come from, as error messages name it.
struct Source {
    flag: &'static str,
    env: &'static str,
    key: &'static str,
}

/// A reference setting's flag `--<flag>`, variable `AGENT_EVENT_BUS_<env>` and key `bridge.<key>`.
macro_rules! source {
    ($flag:literal, $env:literal, $key:literal) => {
        Source {
            flag: concat!("--", $flag),
            env: concat!("AGENT_EVENT_BUS_", $env),
            key: concat!("bridge.", $key),
        }
    };
}

const PORT: Source = source!("port", "BRIDGE_PORT", "port");
const BACKEND: Source = source!("backend", "BRIDGE_BACKEND", "backend");
const COOLDOWN: Source = source!("cooldown", "BRIDGE_COOLDOWN", "cooldown");
const BUSY_TTL: Source = source!("busy-ttl", "BRIDGE_BUSY_TTL", "busy_ttl");
const WAKE_DIR: Source = source!("wake-dir", "WAKE_DIR", "wake_dir");
const BUS_URL: Source = source!("bus-url", "URL", "bus_url");
const HOOK_URL: Source = source!("hook-url", "BRIDGE_HOOK_URL", "hook_url");
const BIND: Source = source!("bind", "BRIDGE_BIND", "bind");
const ALLOWED_HOSTS: Source = source!("allowed-hosts", "BRIDGE_ALLOWED_HOSTS", "allowed_hosts");
/// Env only, so the secret never shows in `ps` (or `[bridge] secret_file`, which this wins over).
pub const SECRET_ENV: &str = "AGENT_EVENT_BUS_BRIDGE_SECRET";
/// Longest `mux.submit_delay`: the 2 s injection budget less two 250 ms step floors (a test in
/// `mux` keeps it in step).
pub const MAX_SUBMIT_DELAY: Duration = Duration::from_millis(1500);

/// The reference's settings, each with its flag's value (if given).
fn reference_sources(flags: &Flags) -> [(&'static Source, Option<&str>); 9] {
    [
        (&PORT, flags.port.as_deref()),
        (&BACKEND, flags.backend.as_deref()),
        (&COOLDOWN, flags.cooldown.as_deref()),
        (&BUSY_TTL, flags.busy_ttl.as_deref()),
        (&WAKE_DIR, flags.wake_dir.as_deref()),
        (&BUS_URL, flags.bus_url.as_deref()),
        (&HOOK_URL, flags.hook_url.as_deref()),
        (&BIND, flags.bind.as_deref()),
        (&ALLOWED_HOSTS, flags.allowed_hosts.as_deref()),
    ]
}

impl Source {
    fn names(&self) -> String {
        format!("{} / {} / {}", self.flag, self.env, self.key)
    }
}

/// Every path wakebridge uses, resolved once, absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// Spools, panes.json, busy markers.
    pub wake_dir: PathBuf,
    /// Context state files and the status-line feed.
    pub state_dir: PathBuf,
    pub ledger: PathBuf,
    pub config_file: Option<PathBuf>,
    /// As Claude Code started in this environment finds them (or why they are unknown).
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
            "" => env
                .absolute_path("HOME")
                .map(|h| h.join(crate::wakedir::DEFAULT_WAKE_DIR_UNDER_HOME))
                .ok_or(ConfigError::NoHome)?,
            set => absolute(set, &origin, &WAKE_DIR.names())?,
        };
        let state_dir = match settings.state.dir.trim() {
            "" => default_state_dir(env).ok_or(ConfigError::NoStateDir)?,
            set => absolute(set, "state.dir", "WAKEBRIDGE_STATE__DIR")?,
        };
        let ledger = match settings.ledger.path.trim() {
            "" => state_dir.join("wakebridge.db"),
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

/// A path setting: only an absolute path means the same file in every working directory.
fn absolute(value: &str, origin: &str, names: &str) -> Result<PathBuf, ConfigError> {
    if Path::new(value).is_absolute() {
        return Ok(PathBuf::from(value));
    }
    Err(ConfigError::Relative {
        origin: origin.to_string(),
        value: value.to_string(),
        names: names.to_string(),
    })
}

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
}

/// Layers defaults < file < `WAKEBRIDGE_*` env into `Settings`, refusing unknown names.
pub fn load_settings(config_file: Option<&Path>, env: &Env) -> Result<Settings, ConfigError> {
    Ok(load(config_file, env)?.0)
}

fn load(config_file: Option<&Path>, env: &Env) -> Result<(Settings, Option<PathBuf>), ConfigError> {
    let (table, user_file) = layered(config_file, env)?;
    let settings = Settings::deserialize(table).map_err(|source| ConfigError::BadSetting {
        file: user_file.clone(),
        source,
    })?;
    Ok((settings, user_file))
}

fn layered(
    config_file: Option<&Path>,
    env: &Env,
) -> Result<(toml::Table, Option<PathBuf>), ConfigError> {
    let user_file = match config_file {
        Some(path) if !path.is_file() => {
            return Err(ConfigError::NoFile {
                path: path.to_path_buf(),
            });
        }
        Some(path) => Some(path.to_path_buf()),
        None => default_config_file(env).filter(|p| p.is_file()),
    };
    let mut table = layers::defaults().clone();
    if let Some(path) = &user_file {
        layers::merge(&mut table, read_file(path)?);
    }
    // Both pass over every variable not of the `WAKEBRIDGE_` form.
    let vars = env.vars();
    let vars = vars.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    names::check_env(vars.clone().map(|(k, _)| k))?;
    layers::apply_env(&mut table, vars)?;
    Ok((table, user_file))
}

fn read_file(path: &Path) -> Result<toml::Table, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let file: toml::Table = toml::from_str(&text).map_err(|source| ConfigError::Toml {
        path: path.to_path_buf(),
        source,
    })?;
    names::check_file(path, "", &file)?;
    Ok(file)
}

/// `$XDG_CONFIG_HOME/wakebridge/config.toml`, else `~/.config/wakebridge/config.toml`.
pub fn default_config_file(env: &Env) -> Option<PathBuf> {
    let base = env
        .nonempty("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| env.nonempty("HOME").map(|h| Path::new(&h).join(".config")))?;
    Some(base.join("wakebridge").join("config.toml"))
}

/// `$XDG_STATE_HOME/wakebridge` (absolute only, per XDG), else `~/.local/state/wakebridge`.
fn default_state_dir(env: &Env) -> Option<PathBuf> {
    env.absolute_path("XDG_STATE_HOME")
        .or_else(|| env.absolute_path("HOME").map(|h| h.join(".local/state")))
        .map(|dir| dir.join("wakebridge"))
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
    let port = value.trim().parse::<NonZeroU16>();
    port.map(NonZeroU16::get).map_err(|_| {
        let reason = format!(
            "is not a port: use an integer from 1 to 65535 ({})",
            PORT.names()
        );
        bad_value(origin, value, reason)
    })
}

/// A seconds setting: the reference's variables and flags take plain seconds, as the Python
/// bridge does; wakebridge's own settings take any duration form. `inf` where allowed.
fn seconds_from(
    value: &str,
    origin: &str,
    source: &Source,
    allow_inf: bool,
) -> Result<f64, ConfigError> {
    let names = source.names();
    if origin == source.key {
        let v = value.trim();
        if allow_inf && matches!(v.to_ascii_lowercase().as_str(), "inf" | "+inf" | "infinity") {
            return Ok(f64::INFINITY);
        }
        return duration::parse(v)
            .map(|d| d.as_secs_f64())
            .map_err(|source| ConfigError::Duration {
                origin: origin.to_string(),
                names,
                source,
            });
    }
    // Rust reads `inf`, `infinity` and `nan` in any case and with a sign, as Python does.
    let parsed = value.trim().parse::<f64>().ok();
    let hint = if allow_inf {
        "a number of seconds >= 0, or inf"
    } else {
        "a finite number of seconds >= 0"
    };
    let (problem, unit) = match parsed {
        Some(x) if x.is_nan() => ("is NaN", ""),
        Some(x) if x < 0.0 => ("is negative", ""),
        Some(x) if x.is_infinite() && !allow_inf => ("is infinite", ""),
        Some(x) => return Ok(x),
        None => ("is not a number", ", without a unit"),
    };
    let reason = format!("{problem}: use {hint}{unit} ({names})");
    Err(bad_value(origin, value, reason))
}

pub fn resolve(flags: &Flags, env: &Env) -> Result<Config, ConfigError> {
    let (settings, config_file) = load(flags.config.as_deref(), env)?;
    let b = &settings.bridge;

    let (port_s, origin) = pick(&flags.port, env, &PORT, &b.port);
    let port = parse_port(&port_s, &origin)?;

    let (backend_s, origin) = pick(&flags.backend, env, &BACKEND, &b.backend);
    let backend = backend_s.trim().parse::<Backend>().map_err(|_| {
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
    let given = (flags.allowed_hosts.clone()).or_else(|| env.nonempty(ALLOWED_HOSTS.env));
    let allowed_raw: Vec<String> = match given {
        Some(v) => v.split(',').map(str::to_string).collect(),
        None => b.allowed_hosts.clone(),
    };

    // The reference variable wins; the file's path must be absolute either way.
    let secret_file = match b.secret_file.as_str() {
        "" => None,
        set => Some(absolute(
            set,
            "bridge.secret_file",
            "WAKEBRIDGE_BRIDGE__SECRET_FILE",
        )?),
    };
    let secret = match (env.get(SECRET_ENV).filter(|s| !s.is_empty()), secret_file) {
        (Some(value), _) => Some(Secret::new(value)),
        (None, Some(path)) => Some(secret::read(&path, secret::WEBHOOK_SECRET)?),
        (None, None) => None,
    };

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

    let scope = b.scope.trim().parse::<Scope>().map_err(|_| {
        bad_value(
            "bridge.scope",
            b.scope.trim(),
            "is not a scope: use \"all\" or \"local\" (WAKEBRIDGE_BRIDGE__SCOPE)".into(),
        )
    })?;
    if settings.mux.submit_delay > MAX_SUBMIT_DELAY {
        return Err(ConfigError::SubmitDelay(settings.mux.submit_delay));
    }
    let sync = settings.spool.sync_interval;
    if sync < Duration::from_millis(10) || sync > Duration::from_secs(3600) {
        return Err(ConfigError::SyncInterval(sync));
    }
    for (period, key, example) in [
        (settings.prune.interval, "prune.interval", "\"10m\""),
        (
            settings.page.sample_interval,
            "page.sample_interval",
            "\"1m\"",
        ),
        (
            settings.registration.keep_interval,
            "registration.keep_interval",
            "\"60s\"",
        ),
    ] {
        if period.is_zero() {
            let var = names::variable_of(key);
            return Err(ConfigError::ZeroInterval { key, example, var });
        }
    }
    for (name, text) in &settings.wake.messages {
        if text.trim().is_empty()
            || text.chars().any(char::is_control)
            || text.starts_with(|c: char| c.is_ascii_digit())
        {
            return Err(ConfigError::WakeMessage(name.clone()));
        }
    }

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
    })
}

#[cfg(test)]
mod tests;
