//! `wakebridge config` and `config --check` from the real binary on a throwaway HOME.

use std::process::Output;

use crate::common::harness::binary;

fn run(root: &std::path::Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    binary(root, env).args(args).output().unwrap()
}

fn settings(stdout: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (setting, origin) = l.rsplit_once("  # ").unwrap();
            (setting.trim_end().to_string(), origin.to_string())
        })
        .collect()
}

#[test]
fn config_shows_each_origin_and_reads_back_as_the_same_configuration() {
    crate::common::arm_test_timeout();
    let root = tempfile::tempdir().unwrap();
    let env = [
        ("WAKEBRIDGE_NUDGER__IDLE_AFTER", "7m"),
        ("AGENT_EVENT_BUS_BRIDGE_SECRET", "do-not-print-me"),
        // A list in a variable; an array in the file.
        (
            "AGENT_EVENT_BUS_BRIDGE_ALLOWED_HOSTS",
            "proxy.example,10.0.0.5:8082",
        ),
        ("WAKEBRIDGE_CONTEXT__MODELS__CLAUDE_X", "300000"),
    ];
    let first = run(root.path(), &env, &["config", "--port", "9011"]);
    assert!(first.status.success(), "{first:?}");
    let text = String::from_utf8_lossy(&first.stdout).into_owned();
    assert!(!text.contains("do-not-print-me"), "{text}");
    assert!(
        text.contains("# secret: set (from AGENT_EVENT_BUS_BRIDGE_SECRET)"),
        "{text}"
    );
    let lines = settings(&first.stdout);
    let origin = |key: &str| {
        lines
            .iter()
            .find(|(s, _)| s.starts_with(&format!("{key} = ")))
            .map(|(s, o)| (s.clone(), o.clone()))
            .unwrap_or_else(|| panic!("no {key} in {text}"))
    };
    assert_eq!(
        origin("nudger.idle_after"),
        (
            "nudger.idle_after = \"7m\"".into(),
            "env WAKEBRIDGE_NUDGER__IDLE_AFTER".into()
        )
    );
    assert_eq!(origin("bridge.port").1, "flag --port");
    assert_eq!(
        origin("bridge.allowed_hosts").0,
        "bridge.allowed_hosts = [\"proxy.example\", \"10.0.0.5:8082\"]"
    );
    assert_eq!(origin("nudger.poll_interval").1, "default");

    // The output is a TOML file: given back as --config, every value is the same, now from it.
    let file = root.path().join("echo.toml");
    std::fs::write(&file, &first.stdout).unwrap();
    let file = file.to_str().unwrap();
    let second = run(root.path(), &[], &["--config", file, "config"]);
    assert!(second.status.success(), "{second:?}");
    let again = settings(&second.stdout);
    assert_eq!(again.len(), lines.len());
    // (The harness's own variables, a spool backend and a wake dir among them, still win.)
    let harness = crate::common::env::test_env(root.path(), &[]);
    for ((a, _), (b, origin)) in lines.iter().zip(&again) {
        assert_eq!(a, b);
        let from_harness = origin
            .strip_prefix("env ")
            .is_some_and(|var| harness.contains_key(var));
        assert!(origin == "file" || from_harness, "{b}: {origin}");
    }
    let check = run(root.path(), &[], &["--config", file, "config", "--check"]);
    assert!(check.status.success(), "{check:?}");
    assert!(String::from_utf8_lossy(&check.stdout).starts_with("wakebridge config: OK ("));
}

#[test]
fn config_check_names_what_is_wrong_and_exits_2() {
    crate::common::arm_test_timeout();
    let root = tempfile::tempdir().unwrap();
    let bad_var = run(
        root.path(),
        &[("AGENT_EVENT_BUS_BRIDGE_PORT", "eighty")],
        &["config", "--check"],
    );
    assert_eq!(bad_var.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&bad_var.stderr);
    assert!(stderr.contains("AGENT_EVENT_BUS_BRIDGE_PORT"), "{stderr}");

    let file = root.path().join("typo.toml");
    std::fs::write(&file, "[nudger]\nidle_aftr = \"5m\"\n").unwrap();
    let typo = run(
        root.path(),
        &[],
        &["--config", file.to_str().unwrap(), "config", "--check"],
    );
    assert_eq!(typo.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&typo.stderr);
    assert!(stderr.contains("nudger.idle_after"), "{stderr}");
    // The same refusal without --check: nothing is explained from a configuration that fails.
    let shown = run(
        root.path(),
        &[],
        &["--config", file.to_str().unwrap(), "config"],
    );
    assert_eq!(shown.status.code(), Some(2));
    assert!(shown.stdout.is_empty());
}
