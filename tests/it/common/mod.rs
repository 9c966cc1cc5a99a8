//! What the integration tests share: the daemon in process and as the real binary
//! ([`harness`]), its private environment ([`env`]), guards for the processes a test starts
//! ([`process`]), one private tmux server type ([`tmux`]), a bare pseudo-terminal with no
//! multiplexer ([`pty`]), the stub agent-event-bus ([`stub_bus`]) and the real one
//! ([`real_bus`]), recording stand-ins for multiplexer binaries ([`stand_in`]), the scripted
//! agent TUIs the tests run in tmux panes (`fake_agent.py`, `fake_claude.py`, next to this
//! file), and the per-test time bound ([`timeout`]).
//!
//! Every test that makes something is bounded without a line of its own: the helpers here arm
//! [`timeout::arm_test_timeout`] when they make a temporary directory, start a server, a daemon,
//! a process or a wait, and a test still running [`timeout::TEST_TIMEOUT`] (180 s) after that
//! fails the run, naming itself and every test still running, after stopping what the tests
//! started. New tests get it by using [`tempdir`] rather than `tempfile::tempdir`.

pub mod agent;
pub mod browser;
pub mod claude;
pub mod codex;
pub mod day;
pub mod env;
pub mod harness;
pub mod model;
pub mod process;
pub mod pty;
pub mod real_bus;
pub mod responses;
pub mod rig;
pub mod stand_in;
pub mod stub_bus;
pub mod timeout;
pub mod tmux;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use wakebridge::reading::screen::PromptReader;
use wakebridge::wakedir::target::PaneTarget;

/// A scripted stand-in for the Claude Code TUI (prompt box, idle/busy titles, a permission
/// dialog), for the nudger's real-tmux tests.
/// Claude Code's prompt, as the injector reads it (the stand-in agents draw the same).
pub static CLAUDE: std::sync::LazyLock<PromptReader> =
    std::sync::LazyLock::new(|| wakebridge::agent::Agent::Claude.side().prompt());

pub const FAKE_AGENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/common/fake_agent.py");

/// A scripted stand-in for Claude Code's first-run screens, for the launcher's tests.
pub const FAKE_CLAUDE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/it/common/fake_claude.py"
);

/// What tests that report failures with `?` return.
pub type TestResult = Result<(), Box<dyn std::error::Error>>;

/// How often [`eventually`] and its kin look again.
const POLL: Duration = Duration::from_millis(20);

/// Polls `probe` until it returns `Ok` and returns the value; fails the test once `limit` of
/// real time has passed (the wall clock: a paused tokio clock cannot stretch it), naming `what`
/// and the last `Err` (what the probe saw instead). The one polling loop of the tests;
/// [`eventually`] and [`eventually_blocking`] are it for a plain condition.
pub async fn eventually_ok<T, E: std::fmt::Display>(
    what: &str,
    limit: Duration,
    mut probe: impl AsyncFnMut() -> Result<T, E>,
) -> T {
    timeout::arm_test_timeout();
    let started = Instant::now();
    loop {
        match probe().await {
            Ok(found) => return found,
            Err(saw) => assert!(
                started.elapsed() < limit,
                "timed out waiting for {what}; last saw: {saw}"
            ),
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until `done` holds, as [`eventually_ok`].
pub async fn eventually(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    eventually_ok(
        what,
        limit,
        async || if done() { Ok(()) } else { Err("false") },
    )
    .await;
}

/// [`eventually`] for a test without a runtime: sleeps the thread between looks.
pub fn eventually_blocking(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    timeout::arm_test_timeout();
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(POLL);
    }
}

/// A private temporary directory for the test (removed when dropped); like every shared
/// helper that starts or makes something, it arms the test's time bound.
pub fn tempdir() -> tempfile::TempDir {
    timeout::arm_test_timeout();
    tempfile::tempdir().expect("create a temporary directory")
}

/// How many deliveries the ledger holds per action, read from its file.
pub fn delivery_counts(
    store: &wakebridge::store::Store,
) -> std::collections::BTreeMap<String, u64> {
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
    let conn = rusqlite::Connection::open_with_flags(store.path(), flags).expect("open the ledger");
    let mut counts = conn
        .prepare("SELECT action, count(*) FROM deliveries GROUP BY action")
        .expect("prepare");
    let rows = counts.query_map([], |row| Ok((row.get(0)?, row.get(1)?)));
    rows.and_then(Iterator::collect).expect("count deliveries")
}

/// Appends `text` to `path`, creating it: how a transcript grows.
pub fn append(path: &Path, text: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)?;
    f.write_all(text.as_bytes())
}

/// A tmux pane, with no session named.
pub fn tmux_target(pane: &str) -> PaneTarget {
    PaneTarget::Tmux {
        pane: pane.to_owned(),
        session: None,
    }
}

/// A pane in a zellij session.
pub fn zellij_target(session: &str, pane: &str) -> PaneTarget {
    PaneTarget::Zellij {
        pane: pane.to_owned(),
        session: session.to_owned(),
    }
}

/// Whether the tests run in CI: `CI` is `true` or `1`, as CI services and `.ci/run` set it.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// What a test does at the point where a real component it needs (`what`: what is missing)
/// turns out to be absent: outside CI it prints a note and the caller returns (skips); in CI it
/// fails the test, because `.ci/run` installs every such component and a skip there would
/// pass a test that never ran. `how_to_get_it` says how to install it. Only for components
/// `.ci/run` installs; a platform that refuses a feature (a tmpfs mount without the privilege)
/// is a plain skip.
pub fn skip_or_fail(what: &str, how_to_get_it: &str) {
    assert!(
        !in_ci(),
        "{what}: in CI (CI={}) a missing component fails the test instead of skipping it; \
         {how_to_get_it}",
        std::env::var("CI").unwrap_or_default()
    );
    eprintln!("skipped: {what} ({how_to_get_it})");
}

/// How to get the Claude Code the real-Claude tests need, for [`skip_or_fail`].
pub const GET_CLAUDE: &str = "install the tested version with `npm install -g \
                              @anthropic-ai/claude-code@2.1.332` (.ci/run installs it)";

/// How to get the Codex CLI the real-Codex tests need, for [`skip_or_fail`].
pub const GET_CODEX: &str = "install the tested version with `npm install -g \
                             @openai/codex@0.171.0` (.ci/run installs it)";

/// The real Codex CLI on PATH (`.ci/run` installs it from npm), if any.
pub fn real_codex() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("codex"))
        .find(|candidate| candidate.is_file())
}

/// How to get python3, for [`skip_or_fail`].
pub const GET_PYTHON3: &str = "`apt-get install python3` (.ci/run installs it)";

/// The real Claude Code on PATH (`.ci/run` installs it from npm), if any: the tests that need
/// it skip with a note without it, or fail in CI ([`skip_or_fail`]).
pub fn real_claude() -> Option<PathBuf> {
    timeout::arm_test_timeout();
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("claude"))
        .find(|candidate| candidate.is_file())
}

/// The dummy API key the real-Claude tests start Claude Code with (offline, never sent).
pub const CLAUDE_TEST_KEY: &str = "sk-ant-api03-wakebridge-test-key-0123456789abcdefghij";

/// A throw-away Claude Code home at `home` for starting it in `work` with no first-run screen:
/// [`CLAUDE_TEST_KEY`] pre-approved (its last 20 characters), onboarding done, `work` trusted,
/// and `settings` as `.claude/settings.json`.
pub fn claude_home(home: &Path, work: &Path, settings: &serde_json::Value) {
    claude_home_with(home, work, settings, &serde_json::json!({}));
}

/// [`claude_home`] with `global`'s keys added to `.claude.json` (e.g.
/// `messageIdleNotifThresholdMs`, how soon an idle prompt fires its `idle_prompt` notification).
pub fn claude_home_with(
    home: &Path,
    work: &Path,
    settings: &serde_json::Value,
    global: &serde_json::Value,
) {
    std::fs::create_dir_all(home.join(".claude")).expect("home");
    std::fs::create_dir_all(work).expect("work");
    let work = std::fs::canonicalize(work).expect("work");
    let key = CLAUDE_TEST_KEY;
    let mut state = serde_json::json!({
        "customApiKeyResponses": {"approved": [&key[key.len() - 20..]], "rejected": []},
        "hasCompletedOnboarding": true,
        "projects": {work.to_string_lossy(): {"hasTrustDialogAccepted": true}},
    });
    if let (Some(state), Some(global)) = (state.as_object_mut(), global.as_object()) {
        state.extend(global.clone());
    }
    std::fs::write(home.join(".claude.json"), state.to_string()).expect("state");
    std::fs::write(home.join(".claude/settings.json"), settings.to_string()).expect("settings");
}
