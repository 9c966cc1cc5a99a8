//! The Python bridge's network rules: the address the listener binds, the Host names it answers,
//! the combinations of bus URL, hook URL, bind and secret it refuses, and the ones it warns about.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

use super::ConfigError;
use super::hosts::{HostAllowlist, canonical_entry};

/// Host names every listener answers to, whatever it is bound to.
const LOOPBACK_NAMES: [&str; 3] = ["127.0.0.1", "localhost", "::1"];

pub(super) struct Inputs<'a> {
    pub port: u16,
    pub bus_url: &'a str,
    pub bus_origin: &'a str,
    pub hook_url: &'a str,
    pub hook_origin: &'a str,
    pub bind: &'a str,
    pub bind_origin: &'a str,
    pub allowed_hosts: &'a [String],
    pub has_secret: bool,
}

#[derive(Debug, Clone)]
pub struct Topology {
    pub bind: IpAddr,
    pub allowlist: HostAllowlist,
    /// Logged by `serve` at start-up, printed by `config`.
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum UrlProblem {
    #[error("unbalanced '['")]
    UnbalancedBracket,
    #[error("no host name")]
    NoHost,
    #[error("bad port")]
    BadPort,
    #[error("no scheme")]
    NoScheme,
    #[error("scheme {0:?} is not http or https")]
    Scheme(String),
    #[error(transparent)]
    Parse(url::ParseError),
}

/// A parsed http(s) URL's host, as the rules need it.
struct UrlHost {
    host: String,
    ip: Option<IpAddr>,
    /// A loopback IP literal or exactly `localhost` (no DNS: other names count as remote).
    loopback: bool,
    port: u16,
    path: String,
    https: bool,
}

fn parse_http_url(raw: &str, origin: &str, what: &'static str) -> Result<UrlHost, ConfigError> {
    let fail = |problem| ConfigError::Url {
        origin: origin.to_string(),
        value: raw.to_string(),
        what,
        problem,
    };
    if raw.contains('[') && !raw.contains(']') {
        return Err(fail(UrlProblem::UnbalancedBracket));
    }
    // `url` would read `http:///mcp` as host `mcp`; Python sees no host at all.
    if let Some((_, authority)) = raw.split_once("://")
        && (authority.is_empty() || authority.starts_with(['/', '?', '#']))
    {
        return Err(fail(UrlProblem::NoHost));
    }
    let url = Url::parse(raw).map_err(|e| {
        fail(match e {
            url::ParseError::InvalidPort => UrlProblem::BadPort,
            url::ParseError::EmptyHost => UrlProblem::NoHost,
            url::ParseError::RelativeUrlWithoutBase => UrlProblem::NoScheme,
            other => UrlProblem::Parse(other),
        })
    })?;
    let https = match url.scheme() {
        "http" => false,
        "https" => true,
        other => return Err(fail(UrlProblem::Scheme(other.to_string()))),
    };
    let (host, ip) = match url.host() {
        Some(Host::Domain(d)) if !d.is_empty() => (d.to_ascii_lowercase(), None),
        Some(Host::Ipv4(a)) => (a.to_string(), Some(IpAddr::V4(a))),
        Some(Host::Ipv6(a)) => (a.to_string(), Some(IpAddr::V6(a))),
        _ => return Err(fail(UrlProblem::NoHost)),
    };
    let port = url
        .port_or_known_default()
        .ok_or_else(|| fail(UrlProblem::BadPort))?;
    Ok(UrlHost {
        loopback: ip.map_or(host == "localhost", |ip| ip.is_loopback()),
        host,
        ip,
        port,
        path: url.path().to_string(),
        https,
    })
}

pub(super) fn derive(i: Inputs<'_>) -> Result<Topology, ConfigError> {
    let bus = parse_http_url(i.bus_url, i.bus_origin, "bus URL")?;
    let hook = parse_http_url(i.hook_url, i.hook_origin, "hook URL")?;
    if !bus.loopback && hook.loopback {
        return Err(ConfigError::HookUnreachable {
            bus_url: i.bus_url.to_string(),
            hook_url: i.hook_url.to_string(),
        });
    }

    let (bind, pinned) = if i.bind.is_empty() {
        let derived = match hook.loopback {
            true => hook.ip.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            false => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        };
        (derived, false)
    } else if i.bind == "localhost" {
        (IpAddr::V4(Ipv4Addr::LOCALHOST), true)
    } else {
        let ip = i.bind.parse::<IpAddr>().map_err(|_| {
            super::bad_value(
                i.bind_origin,
                i.bind,
                "is not an IP address: give an IP literal such as 127.0.0.1, 0.0.0.0 or ::1, or \
                 exactly localhost, without a port (--bind / AGENT_EVENT_BUS_BRIDGE_BIND)"
                    .into(),
            )
        })?;
        (ip, true)
    };

    let exposed = !bind.is_loopback() || !hook.loopback;
    if exposed && !i.has_secret {
        return Err(ConfigError::NoSecret {
            bind,
            hook_url: i.hook_url.to_string(),
        });
    }

    let mut names = LOOPBACK_NAMES.map(String::from).to_vec();
    names.push(hook.host.clone());
    if !bind.is_unspecified() {
        names.push(bind.to_string());
    }
    for entry in i.allowed_hosts {
        if let Some(canon) = canonical_entry(entry) {
            if canon.is_empty() {
                return Err(ConfigError::EmptyAllowedHost {
                    entry: entry.clone(),
                });
            }
            names.push(canon);
        }
    }

    let warnings = warnings(&i, &hook, bind, pinned);
    Ok(Topology {
        bind,
        allowlist: HostAllowlist::new(names),
        warnings,
    })
}

fn warnings(i: &Inputs<'_>, hook: &UrlHost, bind: IpAddr, pinned: bool) -> Vec<String> {
    let mut w = Vec::new();
    if bind.is_loopback() && !hook.loopback {
        w.push(format!(
            "the listener binds loopback {bind} but advertises the non-loopback hook URL {}: the bus cannot reach it unless a proxy forwards to {bind}",
            i.hook_url
        ));
    }
    if hook.port != i.port {
        w.push(format!(
            "the hook URL {} advertises port {} but the listener is on port {}: make sure something forwards one to the other",
            i.hook_url, hook.port, i.port
        ));
    } else if hook.https {
        w.push(format!(
            "the hook URL {} is https on the listener's own port {}, but the listener speaks plain HTTP: put a TLS terminator in front",
            i.hook_url, i.port
        ));
    }
    if hook.path != "/hook" {
        w.push(format!(
            "the hook URL path is {} but the listener serves /hook: the bus will get 404 unless a proxy rewrites it",
            hook.path
        ));
    }
    if pinned {
        match hook.ip {
            _ if bind.is_unspecified() => {}
            Some(hip)
                if hook.loopback
                    && bind.is_loopback()
                    && hip.is_ipv4() == bind.is_ipv4()
                    && hip != bind =>
            {
                w.push(format!(
                    "--bind {bind} is a different loopback address than the hook URL's {hip}: the bus will POST to {hip} where nothing listens"
                ));
            }
            _ if hook.loopback && !bind.is_loopback() => {
                w.push(format!(
                    "--bind {bind} is neither loopback nor a wildcard, but the hook URL is loopback ({}): the bus POSTs to 127.0.0.1 where nothing listens",
                    i.hook_url
                ));
            }
            _ => {}
        }
    }
    match (hook.ip, bind) {
        (Some(IpAddr::V6(h)), IpAddr::V4(b)) => w.push(format!(
            "the hook URL's address {h} is IPv6 but the listener binds IPv4 {b}: bind :: or an IPv6 address"
        )),
        (Some(IpAddr::V4(h)), IpAddr::V6(b)) if pinned && b != Ipv6Addr::UNSPECIFIED => w.push(format!(
            "the hook URL's address {h} is IPv4 but --bind {b} is an IPv6 address: bind an IPv4 address"
        )),
        _ => {}
    }
    w
}
