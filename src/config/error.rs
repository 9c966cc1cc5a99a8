//! `ConfigError`: every way the configuration can be unusable, as one line naming the setting and
//! the fix.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::{ENV_PREFIX, MAX_SUBMIT_DELAY, UrlProblem, WAKE_DIR, duration};

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
    /// The layered table does not fit `Settings` (a wrong type, a bad duration).
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
    /// `origin` is the flag, variable or key.
    #[error("{origin}={value:?} {reason}")]
    BadValue {
        origin: String,
        value: String,
        reason: String,
    },
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
        "mux.submit_delay = {0:?} leaves no time to type within the injection budget: use at \
         most {MAX_SUBMIT_DELAY:?} (WAKEBRIDGE_MUX__SUBMIT_DELAY)"
    )]
    SubmitDelay(Duration),
    #[error(
        "spool.sync_interval = {0:?} is out of range: use between 10ms and 1h \
         (WAKEBRIDGE_SPOOL__SYNC_INTERVAL)"
    )]
    SyncInterval(Duration),
    /// A period a loop waits between rounds: at zero it would spin (or, for a tokio interval,
    /// panic) instead of pausing.
    #[error("{key} is 0; give a pause between rounds, e.g. {example} ({var})")]
    ZeroInterval {
        key: &'static str,
        example: &'static str,
        var: String,
    },
    /// The text is typed into a prompt, where a control character or a leading digit would do
    /// something else (submit early, pick a menu option).
    #[error(
        "wake.messages.{0} must be one line of printable text that does not start with a digit"
    )]
    WakeMessage(String),
    #[error(transparent)]
    SecretFile(#[from] super::secret::SecretFileError),
}

/// A parser's message (TOML's caret diagram spans lines) as part of one line.
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
