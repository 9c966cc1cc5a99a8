//! Every setting `serve` runs with, validated before anything is locked or bound, even sections
//! switched off: `serve` and `config --check` both call [`Validated::resolve`], so they refuse
//! the same files in the same words. In `app` because `config` is a leaf that knows no feature.

use crate::config::{self, Backend, Config, Env, Flags, LaunchSettings};
use crate::fleet::FleetConfig;
use crate::notify::NotifyConfig;
use crate::session::SessionConfig;

/// A configuration `serve` can run with, and what its features take from it.
#[derive(Debug, Clone)]
pub struct Validated {
    pub config: Config,
    pub notify: Option<NotifyConfig>,
    /// The session loop's settings: with the spool backend it only watches (nothing is typed);
    /// `[nudger] enabled = false` turns off its nudges only, `[context] enabled = false` the
    /// following of transcripts.
    pub sessions: SessionConfig,
    /// What a restart starts.
    pub launch: LaunchSettings,
    /// This machine in the fleet, when `[fleet] key_file` is set.
    pub fleet: Option<FleetConfig>,
}

impl Validated {
    /// `config::resolve`, then [`Validated::new`]. An error names the setting and the fix (each
    /// module's own error, shown as it is).
    pub fn resolve(flags: &Flags, env: &Env) -> Result<Validated, Box<dyn std::error::Error>> {
        Validated::new(config::resolve(flags, env)?)
    }

    pub fn new(config: Config) -> Result<Validated, Box<dyn std::error::Error>> {
        let s = &config.settings;
        let notify = NotifyConfig::from_settings(&s.notify)?;
        let homes = config
            .paths
            .claude
            .iter()
            .map(|home| home.dir.clone())
            .collect();
        let state_dir = config.paths.state_dir.clone();
        let can_type = config.backend == Backend::Mux;
        let sessions = SessionConfig::from_settings(s, state_dir, homes, can_type)?;
        let launch = crate::launch::validate(&s.launch)?;
        let fleet = FleetConfig::from_settings(&s.fleet, config.secret.as_ref())?;
        Ok(Validated {
            config,
            notify,
            sessions,
            launch,
            fleet,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(pairs: &[(&str, &str)]) -> Result<Validated, Box<dyn std::error::Error>> {
        let mut map: std::collections::BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        map.entry("XDG_CONFIG_HOME".into())
            .or_insert_with(|| "/nonexistent-wakebridge-test".into());
        map.entry("HOME".into())
            .or_insert_with(|| "/home/tester".into());
        Validated::resolve(&Flags::default(), &Env::from(map))
    }

    #[test]
    fn the_defaults_run_every_feature() {
        let v = resolved(&[]).unwrap();
        assert!(v.sessions.context.enabled && v.sessions.can_type);
        assert!(v.notify.is_none(), "notify is off by default");
        assert_eq!(v.launch.command, ["claude"]);
    }

    #[test]
    fn a_fleet_key_others_can_read_is_refused_with_the_fix() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("fleet.key");
        std::fs::write(&key, "shared\n").unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let path = key.display().to_string();
        let setting = [("WAKEBRIDGE_FLEET__KEY_FILE", path.as_str())];
        let message = resolved(&setting).unwrap_err().to_string();
        assert!(
            message.contains("chmod 600") && message.contains("fleet.key_file"),
            "{message}"
        );
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let named = [setting[0], ("WAKEBRIDGE_FLEET__MACHINE", "build-box")];
        let fleet = resolved(&named).unwrap().fleet.expect("a fleet with a key");
        assert_eq!(
            (fleet.machine.as_str(), fleet.key.expose()),
            ("build-box", "shared")
        );
        assert!(resolved(&[]).unwrap().fleet.is_none(), "no key, no fleet");
        let same = [setting[0], ("AGENT_EVENT_BUS_BRIDGE_SECRET", "shared")];
        let message = resolved(&same).unwrap_err().to_string();
        assert!(message.contains("holds the bridge secret"), "{message}");
    }

    #[test]
    fn a_section_switched_off_is_still_checked() {
        // Thresholds out of order with the monitor off; a bad nudger message with the spool
        // backend, which runs no nudger.
        let off = resolved(&[
            ("WAKEBRIDGE_CONTEXT__ENABLED", "false"),
            ("WAKEBRIDGE_CONTEXT__THRESHOLDS__WRAP_UP__PERCENT", "90"),
        ]);
        let message = off.unwrap_err().to_string();
        assert!(message.starts_with("context.thresholds"), "{message}");
        let spool = resolved(&[
            ("AGENT_EVENT_BUS_BRIDGE_BACKEND", "spool"),
            ("WAKEBRIDGE_LIMITS__MAX_TRIES", "0"),
        ]);
        let message = spool.unwrap_err().to_string();
        assert!(message.starts_with("limits.max_tries"), "{message}");
        // Valid and off: checked, not run.
        let v = resolved(&[
            ("WAKEBRIDGE_CONTEXT__ENABLED", "false"),
            ("AGENT_EVENT_BUS_BRIDGE_BACKEND", "spool"),
        ])
        .unwrap();
        assert!(!v.sessions.context.enabled && !v.sessions.can_type);
    }

    #[test]
    fn every_section_can_refuse() {
        for pairs in [
            &[("AGENT_EVENT_BUS_BRIDGE_PORT", "0")][..],
            &[("WAKEBRIDGE_NOTIFY__FORMAT", "xml")],
            &[("WAKEBRIDGE_LAUNCH__TIMEOUT", "0")],
            &[("WAKEBRIDGE_REWIND__AFTER", "0")],
            &[("WAKEBRIDGE_CONTEXT__POLL_INTERVAL", "1ms")],
        ] {
            assert!(resolved(pairs).is_err(), "{pairs:?}");
        }
    }
}
