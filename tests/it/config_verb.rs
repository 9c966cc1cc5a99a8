//! `wakebridge config` and `config --check` from the real binary on a throwaway HOME.

use std::process::Output;

use crate::common;
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
    let root = common::tempdir();
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
    let root = common::tempdir();
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

/// One file `serve` must refuse: the `[bridge]` lines beyond the port, the rest of the file,
/// and the setting the message must name.
struct BadFile {
    bridge: &'static str,
    rest: &'static str,
    names: &'static str,
}

/// A real invalid value in every section of config/default.toml (and the thresholds of the
/// issue that started this list: levels out of order).
const BAD_FILES: &[BadFile] = &[
    BadFile {
        bridge: "",
        // Listed checkpoint first, and wrap_up above it: the levels would fire out of order.
        rest: "[context.thresholds.checkpoint]\npercent = 85.0\n\
               [context.thresholds.wrap_up]\npercent = 90.0\n",
        names: "context.thresholds.wrap_up.percent",
    },
    BadFile {
        bridge: "",
        rest: "[context]\npoll_interval = \"10ms\"\n",
        names: "context.poll_interval",
    },
    BadFile {
        bridge: "",
        rest: "[context.models]\nclaude-x = 0\n",
        names: "context.models",
    },
    BadFile {
        bridge: "",
        rest: "[nudger]\nmessages = []\n",
        names: "nudger.messages",
    },
    BadFile {
        bridge: "",
        // A typo is refused before any value is looked at.
        rest: "[nudger]\nidle_aftr = \"5m\"\n",
        names: "nudger.idle_after",
    },
    BadFile {
        bridge: "",
        rest: "[limits]\nmax_tries = 0\n",
        names: "limits.max_tries",
    },
    BadFile {
        bridge: "",
        rest: "[rewind]\nafter = 0\n",
        names: "rewind.after",
    },
    BadFile {
        bridge: "",
        rest: "[notify]\nformat = \"xml\"\n",
        names: "notify.format",
    },
    BadFile {
        bridge: "",
        rest: "[schedule]\nactive_hours = \"9 to 5\"\n",
        names: "schedule.active_hours",
    },
    BadFile {
        bridge: "",
        rest: "[schedule]\nactive_days = [\"mon\", \"funday\"]\n",
        names: "schedule.active_days",
    },
    BadFile {
        bridge: "",
        rest: "[wake.messages]\ngo = \"1. pick the first option\"\n",
        names: "wake.messages.go",
    },
    BadFile {
        bridge: "",
        rest: "[mux]\nsubmit_delay = \"2s\"\n",
        names: "mux.submit_delay",
    },
    BadFile {
        bridge: "scope = \"nearby\"\n",
        rest: "",
        names: "bridge.scope",
    },
    BadFile {
        bridge: "",
        rest: "[launch]\ncommand = []\n",
        names: "launch.command",
    },
    BadFile {
        bridge: "",
        rest: "[registration]\nkeep_interval = 0\n",
        names: "registration.keep_interval",
    },
    BadFile {
        bridge: "",
        rest: "[prune]\ninterval = 0\n",
        names: "prune.interval",
    },
    BadFile {
        bridge: "",
        rest: "[spool]\nsync_interval = \"1ms\"\n",
        names: "spool.sync_interval",
    },
    BadFile {
        bridge: "",
        rest: "[ledger]\npath = \"wakebridge.db\"\n",
        names: "ledger.path",
    },
    BadFile {
        bridge: "",
        rest: "[state]\ndir = \"state\"\n",
        names: "state.dir",
    },
];

/// Runs `cmd` to its end, or kills it after `limit` (a `serve` that accepted the file).
fn finish_within(mut cmd: std::process::Command, limit: std::time::Duration) -> Output {
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn first_line(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

#[test]
fn config_check_refuses_every_file_serve_refuses_in_its_words() {
    let root = common::tempdir();
    // The mux backend, as users run it (the harness's default is spool).
    let env = [("AGENT_EVENT_BUS_BRIDGE_BACKEND", "mux")];
    for (i, bad) in BAD_FILES.iter().enumerate() {
        // A free port each time: a `serve` that wrongly accepted a file could bind it.
        let port = crate::common::harness::free_port();
        let file = root.path().join(format!("bad-{i}.toml"));
        let text = format!("[bridge]\nport = {port}\n{}\n{}", bad.bridge, bad.rest);
        std::fs::write(&file, &text).unwrap();
        let file = file.to_str().unwrap();

        let check = run(root.path(), &env, &["config", "--check", "--config", file]);
        let mut serve = binary(root.path(), &env);
        serve.args(["serve", "--config", file]);
        let served = finish_within(serve, std::time::Duration::from_secs(10));

        let said = first_line(&check.stderr);
        assert_eq!(
            check.status.code(),
            Some(2),
            "config --check on\n{text}\n{check:?}"
        );
        assert_eq!(
            served.status.code(),
            Some(2),
            "serve on\n{text}\n{served:?}"
        );
        assert_eq!(said, first_line(&served.stderr), "on\n{text}");
        assert!(
            said.starts_with("wakebridge: ") && said.contains(bad.names),
            "{said:?} should name {} for\n{text}",
            bad.names
        );
        assert!(check.stdout.is_empty(), "{check:?}");
        // `config` without --check refuses it the same way: nothing is shown from it.
        let shown = run(root.path(), &env, &["config", "--config", file]);
        assert_eq!(shown.status.code(), Some(2), "{shown:?}");
        assert_eq!(first_line(&shown.stderr), said);
        assert!(shown.stdout.is_empty(), "{shown:?}");
    }
}
