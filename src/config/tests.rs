use super::*;
use std::collections::BTreeMap;

fn env(pairs: &[(&str, &str)]) -> Env {
    let mut map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    // Never read the developer's own config file.
    map.entry("XDG_CONFIG_HOME".into())
        .or_insert_with(|| "/nonexistent-wakebridge-test".into());
    map.entry("HOME".into())
        .or_insert_with(|| "/home/tester".into());
    Env::from(map)
}

fn resolve_env(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
    resolve(&Flags::default(), &env(pairs))
}

fn flags(f: impl FnOnce(&mut Flags)) -> Flags {
    let mut flags = Flags::default();
    f(&mut flags);
    flags
}

fn err(pairs: &[(&str, &str)]) -> String {
    resolve_env(pairs)
        .expect_err("should be refused")
        .to_string()
}

#[test]
fn defaults_match_the_reference_except_the_backend() {
    let c = resolve_env(&[]).expect("defaults are valid");
    assert_eq!(c.port, 8082);
    assert_eq!(c.backend, Backend::Mux);
    assert_eq!(c.cooldown, Duration::from_secs(30));
    assert_eq!(c.busy_ttl, 3600.0);
    assert_eq!(
        c.paths.wake_dir,
        PathBuf::from("/home/tester/.claude/contrib/agent-event-bus/wake")
    );
    assert_eq!(c.bus_url, "http://127.0.0.1:8080/mcp");
    assert_eq!(c.hook_url, "http://127.0.0.1:8082/hook");
    assert_eq!(c.topology.bind.to_string(), "127.0.0.1");
    assert_eq!(c.scope, Scope::All);
    assert!(c.secret.is_none());
    assert!(!c.debug);
    assert!(c.topology.warnings.is_empty(), "{:?}", c.topology.warnings);
}

#[test]
fn backend_aliases_and_refusals() {
    assert_eq!(
        resolve_env(&[("AGENT_EVENT_BUS_BRIDGE_BACKEND", "tmux")])
            .expect("ok")
            .backend,
        Backend::Mux
    );
    assert_eq!(
        resolve_env(&[("AGENT_EVENT_BUS_BRIDGE_BACKEND", "spool")])
            .expect("ok")
            .backend,
        Backend::Spool
    );
    assert_eq!(
        resolve_env(&[("AGENT_EVENT_BUS_BRIDGE_BACKEND", "")])
            .expect("ok")
            .backend,
        Backend::Mux
    );
    assert!(
        err(&[("AGENT_EVENT_BUS_BRIDGE_BACKEND", "tmuxx")])
            .contains("AGENT_EVENT_BUS_BRIDGE_BACKEND")
    );
}

#[test]
fn bad_numbers_name_their_setting() {
    for bad in ["eight", "99999", "0"] {
        assert!(
            err(&[("AGENT_EVENT_BUS_BRIDGE_PORT", bad)]).contains("AGENT_EVENT_BUS_BRIDGE_PORT"),
            "{bad}"
        );
    }
    for bad in ["30s", "-5", "nan", "inf"] {
        assert!(
            err(&[("AGENT_EVENT_BUS_BRIDGE_COOLDOWN", bad)])
                .contains("AGENT_EVENT_BUS_BRIDGE_COOLDOWN"),
            "{bad}"
        );
    }
    for bad in ["nan", "-1"] {
        assert!(
            err(&[("AGENT_EVENT_BUS_BRIDGE_BUSY_TTL", bad)]).contains("BUSY_TTL"),
            "{bad}"
        );
    }
    let c = resolve_env(&[
        ("AGENT_EVENT_BUS_BRIDGE_BUSY_TTL", "inf"),
        ("AGENT_EVENT_BUS_BRIDGE_COOLDOWN", "0"),
    ])
    .expect("ok");
    assert!(c.busy_ttl.is_infinite());
    assert_eq!(c.cooldown, Duration::ZERO);
    let f = flags(|f| f.port = Some("eight".into()));
    assert!(
        resolve(&f, &env(&[]))
            .expect_err("bad flag")
            .to_string()
            .contains("--port")
    );
}

#[test]
fn flags_beat_reference_env_which_beats_wakebridge_env() {
    let e = env(&[
        ("AGENT_EVENT_BUS_BRIDGE_PORT", "9001"),
        ("WAKEBRIDGE_BRIDGE__PORT", "9002"),
    ]);
    assert_eq!(resolve(&Flags::default(), &e).expect("ok").port, 9001);
    assert_eq!(
        resolve(&flags(|f| f.port = Some("9003".into())), &e)
            .expect("ok")
            .port,
        9003
    );
    let e = env(&[("WAKEBRIDGE_BRIDGE__PORT", "9002")]);
    assert_eq!(resolve(&Flags::default(), &e).expect("ok").port, 9002);
}

#[test]
fn wakebridge_env_reaches_every_section_and_lists() {
    let e = env(&[
        ("WAKEBRIDGE_REGISTRATION__KEEP_INTERVAL", "5m"),
        ("WAKEBRIDGE_MUX__SHELLS", "bash,zsh"),
        (
            "WAKEBRIDGE_BRIDGE__ALLOWED_HOSTS",
            "proxy.example,10.0.0.5:8082",
        ),
        ("WAKEBRIDGE_BRIDGE__SCOPE", "local"),
    ]);
    let c = resolve(&Flags::default(), &e).expect("ok");
    assert_eq!(
        c.settings.registration.keep_interval,
        Duration::from_secs(300)
    );
    assert_eq!(c.settings.mux.shells, vec!["bash", "zsh"]);
    let allowed: Vec<&str> = c.topology.allowlist.iter().collect();
    assert!(
        allowed.contains(&"proxy.example") && allowed.contains(&"10.0.0.5"),
        "{allowed:?}"
    );
    assert_eq!(c.scope, Scope::Local);
    let bad = resolve(
        &Flags::default(),
        &env(&[("WAKEBRIDGE_REGISTRATION__KEEP_INTERVAL", "soon")]),
    );
    assert!(
        bad.expect_err("bad duration")
            .to_string()
            .contains("keep_interval")
    );
}

#[test]
fn user_file_sits_between_defaults_and_env() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("c.toml");
    std::fs::write(&file, "[bridge]\nport = 9100\ncooldown = 5\n").expect("write");
    let f = flags(|f| f.config = Some(file.clone()));
    let c = resolve(&f, &env(&[])).expect("ok");
    assert_eq!((c.port, c.cooldown), (9100, Duration::from_secs(5)));
    let c = resolve(&f, &env(&[("AGENT_EVENT_BUS_BRIDGE_PORT", "9200")])).expect("ok");
    assert_eq!(c.port, 9200);
    let missing = flags(|f| f.config = Some(dir.path().join("nope.toml")));
    assert!(
        resolve(&missing, &env(&[]))
            .expect_err("missing")
            .to_string()
            .contains("--config")
    );
}

#[test]
fn wake_dir_must_be_absolute_and_empty_means_default() {
    assert!(err(&[("AGENT_EVENT_BUS_WAKE_DIR", "wake")]).contains("--wake-dir"));
    let c = resolve_env(&[("AGENT_EVENT_BUS_WAKE_DIR", "")]).expect("ok");
    assert!(
        c.paths
            .wake_dir
            .ends_with(".claude/contrib/agent-event-bus/wake")
    );
}

#[test]
fn topology_refusals() {
    assert!(
        err(&[("AGENT_EVENT_BUS_URL", "https://bus.tailnet.example/mcp")]).contains("hook-url")
    );
    let remote_ok = [
        ("AGENT_EVENT_BUS_URL", "https://bus.tailnet.example/mcp"),
        (
            "AGENT_EVENT_BUS_BRIDGE_HOOK_URL",
            "http://laptop.tailnet.example:8082/hook",
        ),
        ("AGENT_EVENT_BUS_BRIDGE_SECRET", "s"),
    ];
    assert_eq!(
        resolve_env(&remote_ok)
            .expect("ok")
            .topology
            .bind
            .to_string(),
        "0.0.0.0"
    );
    assert!(err(&remote_ok[..2]).contains("AGENT_EVENT_BUS_BRIDGE_SECRET"));
    assert!(resolve_env(&[("AGENT_EVENT_BUS_URL", "http://127.0.1.1:8080/mcp")]).is_ok());
    for bus in [
        "bus.example:8080/mcp",
        "http:///mcp",
        "http://[::1:8080/mcp",
    ] {
        assert!(
            resolve_env(&[("AGENT_EVENT_BUS_URL", bus)]).is_err(),
            "{bus}"
        );
    }
    for hook in [
        "laptop.example:8082/hook",
        "http:///hook",
        "http://box.example:99999/hook",
        "http://[fd7a:115c::1:8082/hook",
        "http://bridge.example:80o82/hook",
    ] {
        let e = resolve_env(&[
            ("AGENT_EVENT_BUS_BRIDGE_HOOK_URL", hook),
            ("AGENT_EVENT_BUS_BRIDGE_SECRET", "s"),
        ]);
        assert!(e.is_err(), "{hook}");
    }
    assert!(err(&[("AGENT_EVENT_BUS_BRIDGE_BIND", "0.0.0.0")]).contains("SECRET"));
    assert!(err(&[("AGENT_EVENT_BUS_BRIDGE_BIND", "100.100.1.2")]).contains("SECRET"));
    assert!(err(&[("AGENT_EVENT_BUS_BRIDGE_BIND", "localhost:8082")]).contains("--bind"));
    for entry in [":8082", "[]", "[]:8082"] {
        assert!(
            err(&[("AGENT_EVENT_BUS_BRIDGE_ALLOWED_HOSTS", entry)]).contains("no hostname"),
            "{entry}"
        );
    }
}

#[test]
fn bind_is_derived_from_the_hook_url() {
    let bind = |hook: &str| {
        resolve_env(&[
            ("AGENT_EVENT_BUS_BRIDGE_HOOK_URL", hook),
            ("AGENT_EVENT_BUS_BRIDGE_SECRET", "s"),
        ])
        .expect("ok")
        .topology
        .bind
        .to_string()
    };
    assert_eq!(bind("http://127.0.1.1:8082/hook"), "127.0.1.1");
    assert_eq!(bind("http://127.0.0.2:8082/hook"), "127.0.0.2");
    assert_eq!(bind("http://[::1]:8082/hook"), "::1");
    assert_eq!(bind("http://localhost:8082/hook"), "127.0.0.1");
    assert_eq!(bind("http://box.example:8082/hook"), "0.0.0.0");
    let pinned = resolve(
        &flags(|f| f.bind = Some("100.100.1.2".into())),
        &env(&[("AGENT_EVENT_BUS_BRIDGE_SECRET", "s")]),
    );
    let pinned = pinned.expect("ok");
    assert_eq!(pinned.topology.bind.to_string(), "100.100.1.2");
    assert!(pinned.topology.allowlist.allows("100.100.1.2"));
    assert!(
        pinned
            .topology
            .warnings
            .iter()
            .any(|w| w.contains("100.100.1.2") && w.contains("127.0.0.1"))
    );
}

#[test]
fn advisory_warnings() {
    let warns = |pairs: &[(&str, &str)]| resolve_env(pairs).expect("ok").topology.warnings;
    let s = ("AGENT_EVENT_BUS_BRIDGE_SECRET", "s");
    let w = warns(&[
        (
            "AGENT_EVENT_BUS_BRIDGE_HOOK_URL",
            "http://box.local:9090/hook",
        ),
        s,
    ]);
    assert!(w.iter().any(|w| w.contains("9090") && w.contains("8082")));
    let w = warns(&[
        ("AGENT_EVENT_BUS_BRIDGE_HOOK_URL", "http://box.local/hook"),
        s,
    ]);
    assert!(w.iter().any(|w| w.contains("advertises port 80 ")));
    let w = warns(&[
        ("AGENT_EVENT_BUS_BRIDGE_HOOK_URL", "https://box.local/hook"),
        s,
    ]);
    assert!(w.iter().any(|w| w.contains("advertises port 443 ")));
    assert!(!w.iter().any(|w| w.contains("TLS")));
    let w = warns(&[
        ("AGENT_EVENT_BUS_BRIDGE_HOOK_URL", "http://box.local/hook"),
        ("AGENT_EVENT_BUS_BRIDGE_PORT", "80"),
        s,
    ]);
    assert!(w.is_empty(), "{w:?}");
    let w = warns(&[
        (
            "AGENT_EVENT_BUS_BRIDGE_HOOK_URL",
            "https://bridge.tailnet.example:8082/hook",
        ),
        s,
    ]);
    assert!(w.iter().any(|w| w.contains("TLS terminator")));
    let w = warns(&[(
        "AGENT_EVENT_BUS_BRIDGE_HOOK_URL",
        "http://127.0.0.1:8082/webhook",
    )]);
    assert!(
        w.iter()
            .any(|w| w.contains("/webhook") && w.contains("/hook"))
    );
    let w = warns(&[
        ("AGENT_EVENT_BUS_BRIDGE_BIND", "127.0.0.1"),
        (
            "AGENT_EVENT_BUS_BRIDGE_HOOK_URL",
            "http://127.0.1.1:8082/hook",
        ),
    ]);
    assert!(w.iter().any(|w| w.contains("different loopback")));
    assert!(
        warns(&[
            ("AGENT_EVENT_BUS_BRIDGE_BIND", "127.0.0.1"),
            (
                "AGENT_EVENT_BUS_BRIDGE_HOOK_URL",
                "http://localhost:8082/hook"
            )
        ])
        .is_empty()
    );
    for bind in ["0.0.0.0", "::"] {
        assert!(
            warns(&[("AGENT_EVENT_BUS_BRIDGE_BIND", bind), s]).is_empty(),
            "{bind}"
        );
    }
    let w = warns(&[
        (
            "AGENT_EVENT_BUS_BRIDGE_HOOK_URL",
            "http://[fd7a:115c:a1e0::1]:8082/hook",
        ),
        s,
    ]);
    assert!(w.iter().any(|w| w.contains("IPv6")));
    let w = warns(&[("AGENT_EVENT_BUS_BRIDGE_BIND", "::1")]);
    assert!(w.iter().any(|w| w.contains("IPv4") && w.contains("::1")));
    let w = warns(&[
        (
            "AGENT_EVENT_BUS_BRIDGE_HOOK_URL",
            "http://[fd7a:115c:a1e0::1]:8082/hook",
        ),
        ("AGENT_EVENT_BUS_BRIDGE_BIND", "::"),
        s,
    ]);
    assert!(w.is_empty(), "{w:?}");
}

#[test]
fn allowlist_composition() {
    let c = resolve_env(&[
        (
            "AGENT_EVENT_BUS_BRIDGE_HOOK_URL",
            "http://[FD7A:115C:A1E0:0:0:0:0:1]:8082/hook",
        ),
        ("AGENT_EVENT_BUS_BRIDGE_SECRET", "s"),
        (
            "AGENT_EVENT_BUS_BRIDGE_ALLOWED_HOSTS",
            " proxy.example , 10.0.0.5:8082,",
        ),
    ])
    .expect("ok");
    let list = &c.topology.allowlist;
    for host in [
        "[fd7a:115c:a1e0::1]:8082",
        "[FD7A:115C:A1E0::1]:8082",
        "[fd7a:115c:a1e0:0:0:0:0:1]",
        "proxy.example",
        "10.0.0.5:8082",
        "localhost:8082",
        "[::1]",
    ] {
        assert!(list.allows(host), "{host}");
    }
    for host in ["evil.example", "p", "", "0.0.0.0"] {
        assert!(!list.allows(host), "{host}");
    }
}

#[test]
fn dev_mode_turns_on_debug() {
    assert!(resolve_env(&[("DEV_MODE", "1")]).expect("ok").debug);
    assert!(!resolve_env(&[("DEV_MODE", "")]).expect("ok").debug);
}

#[test]
fn wake_messages_must_be_safe_to_type() {
    let bad = resolve_env(&[("WAKEBRIDGE_WAKE__MESSAGES__X", "1. pick the first option")]);
    assert!(
        bad.expect_err("leading digit")
            .to_string()
            .contains("wake.messages.x")
    );
}

#[test]
fn submit_delay_must_leave_time_to_type() {
    assert!(resolve_env(&[("WAKEBRIDGE_MUX__SUBMIT_DELAY", "1500ms")]).is_ok());
    let err = resolve_env(&[("WAKEBRIDGE_MUX__SUBMIT_DELAY", "2s")])
        .expect_err("too long")
        .to_string();
    assert!(
        err.contains("mux.submit_delay") && err.contains("WAKEBRIDGE_MUX__SUBMIT_DELAY"),
        "{err}"
    );
}

#[test]
fn spool_sync_interval_is_layered_and_bounded() {
    let ok = resolve(
        &Flags::default(),
        &env(&[("WAKEBRIDGE_SPOOL__SYNC_INTERVAL", "250ms")]),
    )
    .expect("ok");
    assert_eq!(ok.settings.spool.sync_interval, Duration::from_millis(250));
    let zero = resolve(
        &Flags::default(),
        &env(&[("WAKEBRIDGE_SPOOL__SYNC_INTERVAL", "0s")]),
    );
    let message = zero.expect_err("zero refused").to_string();
    assert!(message.contains("spool.sync_interval"), "{message}");
    assert!(
        message.contains("WAKEBRIDGE_SPOOL__SYNC_INTERVAL"),
        "{message}"
    );
}

#[test]
fn loop_periods_must_be_more_than_zero() {
    // prune.interval feeds a tokio interval (which panics at zero) and a sleep; the keeper
    // re-lists the bus every keep_interval: at zero both would spin.
    for (var, key) in [
        ("WAKEBRIDGE_PRUNE__INTERVAL", "prune.interval"),
        ("WAKEBRIDGE_PAGE__SAMPLE_INTERVAL", "page.sample_interval"),
        (
            "WAKEBRIDGE_REGISTRATION__KEEP_INTERVAL",
            "registration.keep_interval",
        ),
    ] {
        let message = err(&[(var, "0")]);
        assert!(message.starts_with(&format!("{key} is 0")), "{message}");
        assert!(message.contains(var), "{message}");
        assert!(resolve_env(&[(var, "1ms")]).is_ok(), "{var}");
    }
}

#[test]
fn state_dir_and_ledger_follow_xdg_then_home_and_are_refused_without_either() {
    let paths = |pairs: &[(&str, &str)]| resolve_env(pairs).map(|c| c.paths);
    let p = paths(&[("XDG_STATE_HOME", "/x/state")]).expect("ok");
    assert_eq!(p.ledger, PathBuf::from("/x/state/wakebridge/wakebridge.db"));
    let p = paths(&[]).expect("ok");
    assert_eq!(
        p.ledger,
        PathBuf::from("/home/tester/.local/state/wakebridge/wakebridge.db")
    );
    for bad in ["", "relative/state"] {
        let p = paths(&[("XDG_STATE_HOME", bad)]).expect("ok");
        assert_eq!(
            p.state_dir,
            PathBuf::from("/home/tester/.local/state/wakebridge")
        );
    }
    let e = resolve(
        &Flags::default(),
        &Env::from_pairs([
            (
                "XDG_CONFIG_HOME".to_string(),
                "/nonexistent-wakebridge-test".to_string(),
            ),
            ("AGENT_EVENT_BUS_WAKE_DIR".to_string(), "/w".to_string()),
        ]),
    )
    .expect_err("no HOME, no XDG_STATE_HOME");
    assert!(
        e.to_string().contains("XDG_STATE_HOME") && e.to_string().contains("HOME"),
        "{e}"
    );
    let p = paths(&[("WAKEBRIDGE_LEDGER__PATH", "/elsewhere/l.db")]).expect("ok");
    assert_eq!(p.ledger, PathBuf::from("/elsewhere/l.db"));
    let e = err(&[("WAKEBRIDGE_STATE__DIR", "rel")]);
    assert!(
        e.contains("relative") && e.contains("WAKEBRIDGE_STATE__DIR"),
        "{e}"
    );
}

#[test]
fn wake_dir_flag_beats_reference_env_beats_own_env_beats_file_beats_default() {
    let root = tempfile::tempdir().expect("tempdir");
    let file = root.path().join("c.toml");
    std::fs::write(&file, "[bridge]\nwake_dir = \"/from/file\"\n").expect("file");
    let with_file = |f: &mut Flags| f.config = Some(file.clone());
    let wake = |flags: Flags, pairs: &[(&str, &str)]| {
        resolve(&flags, &env(pairs)).expect("valid").paths.wake_dir
    };
    assert_eq!(wake(flags(with_file), &[]), PathBuf::from("/from/file"));
    assert_eq!(
        wake(
            flags(with_file),
            &[("WAKEBRIDGE_BRIDGE__WAKE_DIR", "/own/env")]
        ),
        PathBuf::from("/own/env")
    );
    assert_eq!(
        wake(
            flags(with_file),
            &[
                ("WAKEBRIDGE_BRIDGE__WAKE_DIR", "/own/env"),
                ("AGENT_EVENT_BUS_WAKE_DIR", "/reference/env")
            ]
        ),
        PathBuf::from("/reference/env")
    );
    let flag = |f: &mut Flags| {
        f.config = Some(file.clone());
        f.wake_dir = Some("/flag".into());
    };
    assert_eq!(
        wake(
            flags(flag),
            &[("AGENT_EVENT_BUS_WAKE_DIR", "/reference/env")]
        ),
        PathBuf::from("/flag")
    );
    // An empty reference variable means the default, as in the Python CLI.
    assert_eq!(
        wake(Flags::default(), &[("AGENT_EVENT_BUS_WAKE_DIR", "")]),
        PathBuf::from("/home/tester/.claude/contrib/agent-event-bus/wake")
    );
    let e = err(&[("AGENT_EVENT_BUS_WAKE_DIR", "wake")]);
    assert!(e.contains("relative") && e.contains("--wake-dir"), "{e}");
    let e = resolve(
        &Flags::default(),
        &Env::from_pairs([
            (
                "XDG_CONFIG_HOME".to_string(),
                "/nonexistent-wakebridge-test".to_string(),
            ),
            ("XDG_STATE_HOME".to_string(), "/s".to_string()),
        ]),
    )
    .expect_err("no HOME");
    assert!(
        e.to_string().contains("HOME") && e.to_string().contains("--wake-dir"),
        "{e}"
    );
}

#[test]
fn unknown_file_keys_and_variables_are_refused_with_the_nearest_name() {
    let root = tempfile::tempdir().expect("tempdir");
    let file = root.path().join("c.toml");
    std::fs::write(&file, "[nudger]\nidle_aftr = \"1m\"\n").expect("file");
    let e = resolve(&flags(|f| f.config = Some(file.clone())), &env(&[])).expect_err("refused");
    assert!(
        e.to_string().contains("did you mean `nudger.idle_after`"),
        "{e}"
    );
    let e = err(&[("WAKEBRIDGE_NUDGER__IDLE_AFTR", "1m")]);
    assert!(
        e.contains("did you mean WAKEBRIDGE_NUDGER__IDLE_AFTER"),
        "{e}"
    );
}

#[test]
fn durations_take_seconds_or_units_and_say_so_when_wrong() {
    let c = resolve_env(&[
        ("WAKEBRIDGE_NUDGER__IDLE_AFTER", "30"),
        ("WAKEBRIDGE_NUDGER__POLL_INTERVAL", "2s"),
        ("WAKEBRIDGE_BRIDGE__COOLDOWN", "1m"),
    ])
    .expect("valid");
    assert_eq!(c.settings.nudger.idle_after, Duration::from_secs(30));
    assert_eq!(c.settings.nudger.poll_interval, Duration::from_secs(2));
    assert_eq!(c.cooldown, Duration::from_secs(60));
    let e = err(&[("WAKEBRIDGE_NUDGER__IDLE_AFTER", "soon")]);
    assert!(e.contains("idle_after") && e.contains("90s"), "{e}");
    // The reference's own variable keeps the reference's rule: plain seconds.
    let e = err(&[("AGENT_EVENT_BUS_BRIDGE_COOLDOWN", "30s")]);
    assert!(e.contains("COOLDOWN"), "{e}");
    let names = "(--cooldown / AGENT_EVENT_BUS_BRIDGE_COOLDOWN / bridge.cooldown)";
    for (value, says) in [
        (
            "30s",
            "is not a number: use a finite number of seconds >= 0, without a unit",
        ),
        ("-1", "is negative: use a finite number of seconds >= 0"),
        ("nan", "is NaN: use a finite number of seconds >= 0"),
        ("inf", "is infinite: use a finite number of seconds >= 0"),
    ] {
        let e = err(&[("AGENT_EVENT_BUS_BRIDGE_COOLDOWN", value)]);
        assert_eq!(
            e,
            format!("AGENT_EVENT_BUS_BRIDGE_COOLDOWN={value:?} {says} {names}")
        );
    }
    let e = err(&[("AGENT_EVENT_BUS_BRIDGE_BUSY_TTL", "-1")]);
    assert!(
        e.contains("is negative: use a number of seconds >= 0, or inf ("),
        "{e}"
    );
}

#[test]
fn a_variable_of_the_wrong_type_is_refused_naming_the_setting() {
    let e = err(&[("WAKEBRIDGE_PRUNE__MAX_TOTAL_BYTES", "lots")]);
    assert!(e.contains("max_total_bytes"), "{e}");
}

#[test]
fn the_built_in_defaults_are_every_setting_and_what_modules_start_from() {
    // config::defaults() must parse (it is the only copy of every default); modules' Default
    // impls read it, so they agree with what `serve` resolves with no file and no env.
    let d = super::defaults();
    let resolved = resolve_env(&[]).expect("defaults are valid");
    assert_eq!(d.launch.command, ["claude"]);
    assert_eq!(d.launch.timeout, Duration::from_secs(90));
    assert_eq!(d.mux.submit_delay, resolved.settings.mux.submit_delay);
    let mux = crate::mux::MuxConfig::default();
    assert_eq!(mux.submit_delay, Duration::from_millis(500));
    assert_eq!(mux.shells, resolved.settings.mux.shells);
    assert_eq!(
        crate::spool::SpoolOptions::default().checkpoint_every,
        resolved.settings.spool.sync_interval
    );
}

#[test]
fn the_secret_comes_from_the_env_else_the_secret_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("secret");
    std::fs::write(&file, "from-file\n").expect("write");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let path = file.display().to_string();
    let c = resolve_env(&[("WAKEBRIDGE_BRIDGE__SECRET_FILE", &path)]).expect("valid");
    assert_eq!(c.secret.as_ref().map(Secret::expose), Some("from-file"));
    // The reference variable wins, and the file is then not read at all (even a bad one).
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let c = resolve_env(&[
        ("WAKEBRIDGE_BRIDGE__SECRET_FILE", &path),
        (SECRET_ENV, "from-env"),
    ])
    .expect("valid");
    assert_eq!(c.secret.as_ref().map(Secret::expose), Some("from-env"));
    let e = err(&[("WAKEBRIDGE_BRIDGE__SECRET_FILE", &path)]);
    assert!(e.contains("chmod 600") && e.contains(&path), "{e}");
    let e = err(&[("WAKEBRIDGE_BRIDGE__SECRET_FILE", "relative/secret")]);
    assert!(e.contains("absolute"), "{e}");
    // Relative is refused with the variable set too: `service install` writes the file there.
    let e = err(&[
        ("WAKEBRIDGE_BRIDGE__SECRET_FILE", "relative/secret"),
        (SECRET_ENV, "from-env"),
    ]);
    assert!(e.contains("absolute"), "{e}");
}
