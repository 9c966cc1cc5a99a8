//! `wakebridge config`: every effective setting with the layer it came from, and the paths and
//! addresses derived from them. The secret is shown as set or not, never its value.

use super::{Config, ConfigError, Env, Flags, SECRET_ENV, layered, names, read_file};

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq, strum::Display)]
#[strum(serialize_all = "lowercase")]
pub enum Origin {
    Default,
    File,
    #[strum(to_string = "env {0}")]
    Env(String),
    #[strum(to_string = "flag {0}")]
    Flag(&'static str),
}

/// One setting: its dotted key, its value as TOML, and its origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub key: String,
    pub value: String,
    pub origin: Origin,
}

/// The effective configuration, explained.
#[derive(Debug)]
pub struct Explained {
    pub config: Config,
    pub settings: Vec<Setting>,
    /// Where the secret came from (never its value), if one is set.
    pub secret_from: Option<&'static str>,
    /// What the settings lead to: the paths and addresses `serve` would use.
    pub derived: Vec<(&'static str, String)>,
}

/// Resolves the configuration as `serve` would and says where each value came from.
pub fn explain(flags: &Flags, env: &Env) -> Result<Explained, ConfigError> {
    let config = super::resolve(flags, env)?;
    let (merged, file) = layered(flags.config.as_deref(), env)?;
    let from_file = file.as_deref().map(read_file).transpose()?;
    let mut settings = Vec::new();
    leaves(&[], &merged, &mut |parts, value| {
        let variable = names::variable_of(&parts.join("."));
        let origin = if env.get(&variable).is_some() {
            Origin::Env(variable)
        } else if from_file.as_ref().and_then(|t| lookup(t, parts)).is_some() {
            Origin::File
        } else {
            Origin::Default
        };
        settings.push(Setting {
            key: toml_key(parts),
            value: value.to_string(),
            origin,
        });
    });
    // The reference's settings: its flag, then its own variable, beat the layered value.
    for (source, flag) in super::reference_sources(flags) {
        let over = match (flag, env.nonempty(source.env)) {
            (Some(value), _) => (value.to_string(), Origin::Flag(source.flag)),
            (None, Some(value)) => (value, Origin::Env(source.env.to_string())),
            (None, None) => continue,
        };
        if let Some(setting) = settings.iter_mut().find(|s| s.key == source.key) {
            // As the file would take it: the host list is an array there, the rest text.
            setting.value = if source.key == "bridge.allowed_hosts" {
                let hosts = over.0.split(',').map(str::trim).filter(|h| !h.is_empty());
                toml::Value::Array(hosts.map(|h| toml::Value::String(h.into())).collect())
                    .to_string()
            } else {
                toml::Value::String(over.0).to_string()
            };
            setting.origin = over.1;
        }
    }
    let paths = &config.paths;
    let claude_dir = match &paths.claude {
        Ok(home) => home.dir.display().to_string(),
        Err(e) => format!("unknown: {e}"),
    };
    let derived = vec![
        ("wake dir", paths.wake_dir.display().to_string()),
        ("state dir", paths.state_dir.display().to_string()),
        ("ledger", paths.ledger.display().to_string()),
        ("Claude Code dir", claude_dir),
        (
            "listens on",
            format!("{}:{}", config.topology.bind, config.port),
        ),
        ("hook URL", config.hook_url.clone()),
    ];
    let secret_from = config.secret.as_ref().map(|_| {
        if env.get(SECRET_ENV).is_some_and(|s| !s.is_empty()) {
            SECRET_ENV
        } else {
            "bridge.secret_file"
        }
    });
    Ok(Explained {
        config,
        settings,
        secret_from,
        derived,
    })
}

fn leaves(prefix: &[String], table: &toml::Table, each: &mut dyn FnMut(&[String], &toml::Value)) {
    for (key, value) in table {
        let mut path = prefix.to_vec();
        path.push(key.clone());
        match value {
            toml::Value::Table(inner) => leaves(&path, inner, each),
            value => each(&path, value),
        }
    }
}

fn lookup<'a>(table: &'a toml::Table, parts: &[String]) -> Option<&'a toml::Value> {
    let (first, rest) = parts.split_first()?;
    rest.iter()
        .try_fold(table.get(first)?, |value, part| value.get(part))
}

/// A dotted TOML key: each part bare where TOML allows it, quoted otherwise (a model id with a
/// dot, a message name with a space), so the line reads back as the same key.
fn toml_key(parts: &[String]) -> String {
    let bare = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    parts
        .iter()
        .map(|part| {
            if bare(part) {
                part.clone()
            } else {
                toml::Value::String(part.clone()).to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin_of<'a>(explained: &'a Explained, key: &str) -> &'a Setting {
        explained
            .settings
            .iter()
            .find(|s| s.key == key)
            .unwrap_or_else(|| panic!("no {key}"))
    }

    #[test]
    fn each_value_names_the_layer_it_came_from() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(
            &file,
            "[nudger]\nidle_after = \"7m\"\n[bridge]\ncooldown = 45\n",
        )
        .unwrap();
        let env = Env::from_pairs([
            ("HOME", dir.path().to_str().unwrap()),
            ("WAKEBRIDGE_NUDGER__ACKNOWLEDGE_AFTER", "5"),
            ("AGENT_EVENT_BUS_BRIDGE_BACKEND", "spool"),
            ("AGENT_EVENT_BUS_BRIDGE_SECRET", "hush"),
        ]);
        let flags = Flags {
            config: Some(file.clone()),
            port: Some("9001".into()),
            ..Flags::default()
        };
        let explained = explain(&flags, &env).unwrap();
        assert_eq!(
            explained.config.paths.config_file.as_deref(),
            Some(file.as_path())
        );
        let idle = origin_of(&explained, "nudger.idle_after");
        assert_eq!(
            (idle.value.as_str(), &idle.origin),
            ("\"7m\"", &Origin::File)
        );
        let cooldown = origin_of(&explained, "bridge.cooldown");
        assert_eq!(
            (cooldown.value.as_str(), &cooldown.origin),
            ("45", &Origin::File)
        );
        let max = origin_of(&explained, "nudger.acknowledge_after");
        assert_eq!(
            max.origin,
            Origin::Env("WAKEBRIDGE_NUDGER__ACKNOWLEDGE_AFTER".into())
        );
        assert_eq!(max.value, "5");
        let backend = origin_of(&explained, "bridge.backend");
        assert_eq!(
            (backend.value.as_str(), &backend.origin),
            (
                "\"spool\"",
                &Origin::Env("AGENT_EVENT_BUS_BRIDGE_BACKEND".into())
            )
        );
        let port = origin_of(&explained, "bridge.port");
        assert_eq!(
            (port.value.as_str(), &port.origin),
            ("\"9001\"", &Origin::Flag("--port"))
        );
        assert_eq!(
            origin_of(&explained, "mux.submit_delay").origin,
            Origin::Default
        );
        assert_eq!(explained.secret_from, Some(SECRET_ENV));
        assert!(
            explained.settings.iter().all(|s| !s.value.contains("hush")),
            "the secret is never shown"
        );
        assert!(
            explained
                .derived
                .contains(&("listens on", "127.0.0.1:9001".into()))
        );
    }

    #[test]
    fn keys_that_are_not_bare_are_quoted() {
        let parts = |p: &[&str]| p.iter().map(|s| (*s).to_string()).collect::<Vec<_>>();
        assert_eq!(toml_key(&parts(&["bridge", "port"])), "bridge.port");
        assert_eq!(
            toml_key(&parts(&["context", "models", "claude-3.5-sonnet"])),
            "context.models.\"claude-3.5-sonnet\""
        );
        let line = format!("{} = 1", toml_key(&parts(&["wake", "messages", "a b"])));
        let read: toml::Table = toml::from_str(&line).unwrap();
        assert!(read["wake"]["messages"].get("a b").is_some(), "{line}");
    }

    #[test]
    fn a_configuration_that_does_not_resolve_is_not_explained() {
        let env = Env::from_pairs([("HOME", "/tmp"), ("AGENT_EVENT_BUS_BRIDGE_PORT", "0")]);
        let e = explain(&Flags::default(), &env).unwrap_err();
        assert!(e.to_string().contains("AGENT_EVENT_BUS_BRIDGE_PORT"), "{e}");
    }
}
