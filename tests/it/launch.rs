//! The launcher against a real tmux server on a private socket and a scripted stand-in for
//! Claude Code's first-run TUI (`tests/it/common/fake_claude.py`, which records every byte it
//! receives): every first-run screen passed in each trust-dialog wording, the screens it must
//! leave to a human, agents that exit or never get ready, the first prompt, pre-trust, and the
//! CLI's JSON. Where a real `claude` is on PATH the same launch runs against it too (offline,
//! throw-away HOME, dummy pre-approved API key).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use wakebridge::claude::home::ClaudeHome;
use wakebridge::cli::launch::{LaunchArgs, run_with};
use wakebridge::launch::Passed;
use wakebridge::launch::{LaunchError, LaunchOptions, Launched, Mapping, Placement, launch};
use wakebridge::mux::KeystrokeText;

use crate::common;
use crate::common::tmux::TmuxServer;

const FAKE: &str = common::FAKE_CLAUDE;
/// Session id the fake writes into its registry file.
const FAKE_SESSION_ID: &str = "00000000-fake-4000-8000-000000000000";
/// Ready-timeout for the fake: it is ready in about 3 s, so this only bounds a broken run.
const FAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long to wait for the fake to log something the launcher already sent.
const EVENT_WAIT: Duration = Duration::from_secs(5);

/// One launch's world: a server, a project folder, the fake's record and event files, a wake
/// dir and a Claude config home for the registry.
struct Case {
    server: TmuxServer,
    root: tempfile::TempDir,
}

impl Case {
    fn new() -> Self {
        let case = Self {
            server: TmuxServer::start(),
            root: common::tempdir(),
        };
        for dir in ["project", "home/.claude/sessions", "wake"] {
            std::fs::create_dir_all(case.root.path().join(dir)).expect("dirs");
        }
        case
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    fn fake(&self, extra: &[&str]) -> Vec<String> {
        let mut command: Vec<String> = ["python3", FAKE, "--record"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        command.push(self.path("record").display().to_string());
        command.push("--events".into());
        command.push(self.path("events").display().to_string());
        command.push("--sessions-dir".into());
        command.push(self.path("home/.claude/sessions").display().to_string());
        command.extend(extra.iter().map(|s| (*s).to_owned()));
        command
    }

    fn options(&self, command: Vec<String>) -> LaunchOptions {
        LaunchOptions {
            cwd: self.path("project"),
            name: None,
            command,
            prompt: None,
            pre_trust: None,
            timeout: FAKE_TIMEOUT,
            wake_dir: Some(self.path("wake")),
            session_id: None,
            claude_home: Some(ClaudeHome::at(self.path("home/.claude"))),
            placement: Placement::NewSession,
            mux: self.server.config(),
        }
    }

    fn events(&self) -> Vec<String> {
        std::fs::read_to_string(self.path("events"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Wait until the fake has logged `line` (it may still be reading the last key).
    fn wait_for_event(&self, line: &str) -> Vec<String> {
        let started = Instant::now();
        loop {
            let events = self.events();
            if events.iter().any(|e| e == line) || started.elapsed() > EVENT_WAIT {
                return events;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn record(&self) -> Vec<u8> {
        std::fs::read(self.path("record")).unwrap_or_default()
    }

    fn panes_json(&self) -> Value {
        let text = std::fs::read_to_string(self.path("wake/panes.json")).expect("panes.json");
        serde_json::from_str(&text).expect("panes.json is JSON")
    }
}

/// Every ESC the launcher sent starts an arrow key: it never pressed Escape itself.
fn assert_no_escape(record: &[u8]) {
    for (i, byte) in record.iter().enumerate() {
        if *byte == 0x1b {
            assert_eq!(record.get(i + 1), Some(&b'['), "bare Escape in {record:?}");
        }
    }
}

fn assert_mapped(case: &Case, launched: &Launched, session_id: &str) {
    assert!(
        matches!(launched.mapping, Mapping::Written),
        "{:?}",
        launched.mapping
    );
    let panes = case.panes_json();
    assert_eq!(panes[session_id]["pane"], launched.pane.as_str(), "{panes}");
}

#[tokio::test]
async fn passes_every_first_run_screen_of_the_current_wording() {
    let case = Case::new();
    let launched = launch(&case.options(case.fake(&["--wording", "current"])))
        .await
        .expect("ready");
    assert_eq!(
        launched.screens_passed,
        [
            Passed::ThemePicker,
            Passed::SecurityNotes,
            Passed::TrustDialog
        ]
    );
    let events = case.events();
    assert!(events.contains(&"trusted".to_owned()), "{events:?}");
    assert!(!events.contains(&"declined".to_owned()), "{events:?}");
    assert!(events.contains(&"screen ready".to_owned()), "{events:?}");
    // Exactly: Enter (theme), Enter (notes), Down, Enter (trust); no key eaten by the guard.
    let record = case.record();
    assert_eq!(
        record,
        b"\r\r\x1b[B\r",
        "{:?}",
        String::from_utf8_lossy(&record)
    );
    assert!(
        !events.iter().any(|e| e.starts_with("ignored")),
        "{events:?}"
    );
    assert_eq!(launched.session_id.as_deref(), Some(FAKE_SESSION_ID));
    assert_mapped(&case, &launched, FAKE_SESSION_ID);
    assert!(case.server.pane_exists(&launched.pane));
    assert!(launched.pane.starts_with('%') && launched.window.starts_with('@'));
    assert_eq!(launched.tmux_session, "python3-project");
    // The launch's remain-on-exit is dropped again once the agent is up.
    let option = case.server.tmux(&[
        "show-options",
        "-w",
        "-t",
        &launched.window,
        "remain-on-exit",
    ]);
    assert_eq!(option.trim(), "", "{option}");
}

#[tokio::test]
async fn passes_both_older_numbered_wordings_with_enter_alone() {
    for wording in ["numbered-trust", "numbered-proceed"] {
        let case = Case::new();
        let launched = launch(&case.options(case.fake(&["--wording", wording])))
            .await
            .unwrap_or_else(|e| panic!("{wording}: {e}"));
        assert_eq!(launched.screens_passed.len(), 3, "{wording}");
        assert_eq!(case.record(), b"\r\r\r", "{wording}");
        assert!(case.events().contains(&"trusted".to_owned()), "{wording}");
    }
}

#[tokio::test]
async fn refuses_the_api_key_screen_and_leaves_it_to_a_human() {
    let case = Case::new();
    let err = launch(&case.options(case.fake(&["--api-key"])))
        .await
        .expect_err("must not pass the API key screen");
    assert!(matches!(err, LaunchError::HumanNeeded { .. }), "{err}");
    assert_eq!(err.exit_code(), 3);
    let message = err.to_string();
    assert!(message.contains("a human is needed"), "{message}");
    assert!(message.contains("Detected a custom API key"), "{message}");
    // Not one byte was typed at it, and the pane is left for the human.
    assert!(case.record().is_empty(), "{:?}", case.record());
    let LaunchError::HumanNeeded { pane, .. } = &err else {
        unreachable!()
    };
    assert!(case.server.pane_exists(pane));
}

#[tokio::test]
async fn an_agent_that_exits_fails_with_its_last_screen_and_is_removed() {
    let case = Case::new();
    let command = ["sh", "-c", "echo 'fatal: no such model'; sleep 0.3; exit 7"]
        .map(String::from)
        .to_vec();
    let err = launch(&case.options(command)).await.expect_err("exits");
    let message = err.to_string();
    assert!(matches!(err, LaunchError::Exited { .. }), "{message}");
    assert_ne!(err.exit_code(), 0);
    assert!(message.contains("fatal: no such model"), "{message}");
    // tmux reports the status once it has reaped the process; in about one full run in six
    // it had not within the launcher's wait, which then says only "it exited".
    assert!(
        message.contains("(exit status 7)") || message.contains("(it exited)"),
        "{message}"
    );
    assert!(!message.contains("Pane is dead"), "{message}");
    assert_eq!(case.server.pane_count(), 1, "only the keeper remains");
}

/// Every agent the launcher starts asks to be kept working (`WAKEBRIDGE=keep`): its hooks record
/// it, whatever `[nudger] keep` says.
#[tokio::test]
async fn a_launched_agent_runs_asking_to_be_kept() {
    let case = Case::new();
    let seen = case.server.dir().join("env-seen");
    let script = format!("printf %s \"$WAKEBRIDGE\" > '{}'; exit 7", seen.display());
    let command = ["sh", "-c", script.as_str()].map(String::from).to_vec();
    let err = launch(&case.options(command)).await.expect_err("exits");
    assert!(matches!(err, LaunchError::Exited { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(&seen).unwrap(), "keep");
}

#[tokio::test]
async fn a_connectivity_failure_is_an_exit_not_a_success() {
    let case = Case::new();
    let err = launch(&case.options(case.fake(&["--connect-fail"])))
        .await
        .expect_err("fails");
    let message = err.to_string();
    assert!(matches!(err, LaunchError::Exited { .. }), "{message}");
    assert!(
        message.contains("Unable to connect to Anthropic services"),
        "{message}"
    );
}

#[tokio::test]
async fn a_never_ready_agent_times_out_with_its_screen() {
    let case = Case::new();
    let mut opts = case.options(case.fake(&["--never-ready"]));
    opts.timeout = Duration::from_secs(6);
    let started = Instant::now();
    let err = launch(&opts).await.expect_err("times out");
    let took = started.elapsed();
    assert!(matches!(err, LaunchError::NotReady { .. }), "{err}");
    assert_eq!(err.exit_code(), 1);
    assert!(
        took >= Duration::from_secs(6) && took < Duration::from_secs(15),
        "{took:?}"
    );
    assert!(case.events().contains(&"screen never-ready".to_owned()));
    assert_eq!(
        case.server.pane_count(),
        1,
        "the hung agent's session was removed"
    );
}

#[tokio::test]
async fn the_first_prompt_is_typed_once_after_ready() {
    let case = Case::new();
    let mut opts = case.options(case.fake(&[]));
    let prompt = "Read the README and summarise it.";
    opts.prompt = Some(KeystrokeText::new(prompt).expect("valid"));
    let launched = launch(&opts).await.expect("ready");
    assert!(launched.prompt_typed);
    let submitted = format!("submitted {prompt}");
    let events = case.wait_for_event(&submitted);
    assert_eq!(
        events.iter().filter(|e| **e == submitted).count(),
        1,
        "{events:?}"
    );
    let ready_at = events.iter().position(|e| e == "screen ready");
    let typed_at = events.iter().position(|e| *e == submitted);
    assert!(ready_at < typed_at, "{events:?}");
    let record = case.record();
    assert!(
        record.ends_with(format!("{prompt}\r").as_bytes()),
        "{record:?}"
    );
    assert_no_escape(&record);
}

#[tokio::test]
async fn pre_trust_writes_the_config_safely_and_skips_the_dialog() {
    let case = Case::new();
    let config = case.path("home/.claude.json");
    let original = r#"{"userID":"abc","numStartups":3,"projects":{"/elsewhere":{"allowedTools":[]}},"customApiKeyResponses":{"approved":["x"],"rejected":[]}}"#;
    std::fs::write(&config, original).expect("config");
    let config_arg = config.display().to_string();
    let mut opts = case.options(case.fake(&["--config", &config_arg]));
    opts.pre_trust = Some(config.clone());
    let launched = launch(&opts).await.expect("ready");

    assert_eq!(
        launched.screens_passed,
        [Passed::ThemePicker, Passed::SecurityNotes]
    );
    let events = case.events();
    assert!(events.contains(&"pre-trusted".to_owned()), "{events:?}");
    assert!(
        !events.iter().any(|e| e.starts_with("screen trust")),
        "{events:?}"
    );

    let written: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    let project = std::fs::canonicalize(case.path("project")).unwrap();
    let project = project.to_str().unwrap();
    assert_eq!(written["projects"][project]["hasTrustDialogAccepted"], true);
    assert_eq!(written["userID"], "abc");
    assert_eq!(written["numStartups"], 3);
    assert_eq!(
        written["projects"]["/elsewhere"]["allowedTools"],
        Value::Array(vec![])
    );
    assert_eq!(written["customApiKeyResponses"]["approved"][0], "x");

    let done = launched.pre_trusted.expect("pre-trust outcome");
    let backup = done.backup.expect("backup written");
    assert!(backup.starts_with(case.path("home")));
    assert_eq!(std::fs::read_to_string(backup).unwrap(), original);
}

#[tokio::test]
async fn pre_trust_refuses_a_config_that_is_not_json_and_starts_nothing() {
    let case = Case::new();
    let config = case.path("home/.claude.json");
    std::fs::write(&config, "{\"half\": ").expect("config");
    let mut opts = case.options(case.fake(&[]));
    opts.pre_trust = Some(config.clone());
    let err = launch(&opts).await.expect_err("refused");
    assert!(matches!(err, LaunchError::PreTrust(_)), "{err}");
    assert!(err.to_string().contains("not valid JSON"), "{err}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), "{\"half\": ");
    assert_eq!(case.server.pane_count(), 1, "nothing was started");
}

#[tokio::test]
async fn new_window_placement_uses_the_named_session() {
    let case = Case::new();
    let mut opts = case.options(case.fake(&[]));
    opts.placement = Placement::NewWindow {
        target: Some("keeper".into()),
    };
    opts.name = Some("agent".into());
    let launched = launch(&opts).await.expect("ready");
    assert_eq!(launched.tmux_session, "keeper");
    let name = case.server.tmux(&[
        "display-message",
        "-p",
        "-t",
        &launched.pane,
        "#{window_name}",
    ]);
    assert_eq!(name.trim(), "agent");
}

#[tokio::test]
async fn cli_prints_the_documented_json() {
    let case = Case::new();
    let home = case.path("home").display().to_string();
    let env = wakebridge::env::Env::from_pairs([("HOME", home)]);
    let args = LaunchArgs {
        cwd: Some(case.path("project")),
        json: true,
        timeout: Some(FAKE_TIMEOUT.as_secs_f64()),
        wake_dir: Some(case.path("wake")),
        session_id: Some("given-session".into()),
        tmux_socket: Some(case.server.socket().to_path_buf()),
        command: case.fake(&[]),
        ..LaunchArgs::default()
    };
    // The configuration the CLI resolves: its wake dir is the flag's.
    let config = wakebridge::config::resolve(
        &wakebridge::config::Flags {
            wake_dir: Some(case.path("wake").display().to_string()),
            ..Default::default()
        },
        &wakebridge::env::Env::from_pairs([
            ("HOME", case.path("home").display().to_string()),
            (
                "XDG_CONFIG_HOME",
                case.path("xdg-config").display().to_string(),
            ),
        ]),
    )
    .expect("config");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = run_with(args, &config, &env, &mut out, &mut err).await;
    let stderr = String::from_utf8_lossy(&err);
    assert_eq!(code, 0, "{stderr}");
    let json: Value = serde_json::from_slice(&out).expect("one JSON object");
    assert!(json["pane"].as_str().unwrap().starts_with('%'), "{json}");
    assert_eq!(json["tmux_session"], "python3-project");
    assert!(json["window"].as_str().unwrap().starts_with('@'), "{json}");
    let cwd = std::fs::canonicalize(case.path("project")).unwrap();
    assert_eq!(json["cwd"], cwd.to_str().unwrap());
    assert_eq!(json["command"][0], "python3");
    assert_eq!(json["session_id"], "given-session");
    assert_eq!(
        json["screens_passed"],
        serde_json::json!(["theme_picker", "security_notes", "trust_dialog"])
    );
    assert_eq!(case.panes_json()["given-session"]["pane"], json["pane"]);
    assert!(stderr.contains("mapped session given-session"), "{stderr}");
}

// The real Claude Code, when installed (`common::real_claude`): a throw-away HOME with a
// pre-approved dummy key (so no login or key screen), launched offline-tolerant (it sits on a
// blank screen for up to ~20 s while remote settings time out).

const DUMMY_KEY: &str = "sk-ant-api03-wakebridge-test-dummy-key-0123456789abcdefghij";
const REAL_TIMEOUT: Duration = Duration::from_secs(120);

fn real_case(claude: &Path) -> (Case, LaunchOptions) {
    let case = Case::new();
    let home = case.path("home");
    let approved = &DUMMY_KEY[DUMMY_KEY.len() - 20..];
    std::fs::write(
        home.join(".claude.json"),
        serde_json::json!({"customApiKeyResponses": {"approved": [approved], "rejected": []}})
            .to_string(),
    )
    .unwrap();
    let command = vec![
        "env".into(),
        "-i".into(),
        format!("HOME={}", home.display()),
        "TERM=xterm-256color".into(),
        "PATH=/usr/local/bin:/usr/bin:/bin".into(),
        format!("ANTHROPIC_API_KEY={DUMMY_KEY}"),
        claude.display().to_string(),
    ];
    let mut opts = case.options(command);
    opts.timeout = REAL_TIMEOUT;
    (case, opts)
}

#[tokio::test]
async fn real_claude_code_passes_its_first_run_and_is_mapped() {
    let Some(claude) = common::real_claude() else {
        common::skip_or_fail("no `claude` on PATH", common::GET_CLAUDE);
        return;
    };
    let (case, opts) = real_case(&claude);
    let launched = launch(&opts).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        launched.screens_passed.contains(&Passed::TrustDialog),
        "{launched:?}"
    );
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(case.path("home/.claude.json")).unwrap())
            .unwrap();
    let project = std::fs::canonicalize(case.path("project")).unwrap();
    assert_eq!(
        written["projects"][project.to_str().unwrap()]["hasTrustDialogAccepted"],
        true
    );
    let id = launched
        .session_id
        .clone()
        .expect("learned from the registry");
    assert_mapped(&case, &launched, &id);
}

#[tokio::test]
async fn real_claude_code_shows_no_trust_dialog_after_pre_trust() {
    let Some(claude) = common::real_claude() else {
        common::skip_or_fail("no `claude` on PATH", common::GET_CLAUDE);
        return;
    };
    let (case, mut opts) = real_case(&claude);
    opts.pre_trust = Some(case.path("home/.claude.json"));
    let launched = launch(&opts).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !launched.screens_passed.contains(&Passed::TrustDialog),
        "{launched:?}"
    );
    let done = launched.pre_trusted.expect("pre-trusted");
    assert!(done.backup.is_some());
}
