//! The real Codex CLI (`@openai/codex` from npm; `.ci/run` installs it) running real turns
//! offline against a stand-in of the Responses API (`common::responses`): what wakebridge makes
//! of a Codex session today, through the hooks Codex shares with Claude Code (issue 46).

use std::process::Command;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::common;
use crate::common::env::test_env;
use crate::common::harness::TestServer;
use crate::common::responses::{REPLY, Responses};

/// `codex exec` runs one turn; its SessionStart and Stop hooks run `wakebridge hook`, which
/// records the session (its id, directory and transcript, the rollout) in the ledger the
/// daemon reads: `/sessions` lists it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codex_turn_s_hooks_make_its_session_known() {
    let Some(codex) = common::real_codex() else {
        common::skip_or_fail("codex is not on PATH", common::GET_CODEX);
        return;
    };
    let model = Responses::start().await;
    let root = Arc::new(common::tempdir());
    let (codex_home, work) = (root.path().join("codex-home"), root.path().join("work"));
    for dir in [&codex_home, &work, &root.path().join("home")] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(codex_home.join("config.toml"), model.codex_config()).unwrap();
    let hook = json!([{"matcher": "", "hooks": [{"type": "command", "timeout": 10,
        "command": format!("{} hook", env!("CARGO_BIN_EXE_wakebridge"))}]}]);
    let hooks = json!({"hooks": {"SessionStart": hook, "Stop": hook}});
    std::fs::write(codex_home.join("hooks.json"), hooks.to_string()).unwrap();
    let codex_home_text = codex_home.display().to_string();
    let env = test_env(
        root.path(),
        &[
            ("CODEX_HOME", codex_home_text.as_str()),
            ("STUB_API_KEY", "stand-in-key"),
            ("PATH", &std::env::var("PATH").unwrap_or_default()),
        ],
    );
    // The hooks are trusted on the command line: the TUI's one-time review is another test's.
    let out = Command::new(codex)
        .args([
            "exec",
            "--dangerously-bypass-hook-trust",
            "--skip-git-repo-check",
        ])
        .arg("say hello")
        .current_dir(&work)
        .env_clear()
        .envs(&env)
        .output()
        .expect("run codex exec");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains(REPLY), "{stdout}\n{stderr}");
    assert_eq!(model.requests().len(), 1, "one turn, one request");

    let server = TestServer::start_in(root.clone(), &[], Default::default()).await;
    let sessions = server.get_json("/sessions").await;
    let listed = sessions["sessions"].as_array().cloned().unwrap_or_default();
    let session: &Value = (listed.iter())
        .find(|s| s["cwd"] == work.display().to_string())
        .unwrap_or_else(|| panic!("the Codex session is not in /sessions: {sessions}"));
    let transcript = session["transcript_path"].as_str().unwrap_or_default();
    assert!(
        transcript.starts_with(&codex_home_text) && transcript.contains("rollout-"),
        "{session}"
    );
    assert_eq!(session["last_hook_event"], "Stop", "{session}");
    server.stop().await;
}
