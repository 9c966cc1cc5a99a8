//! The real Codex CLI (`@openai/codex` from npm; `.ci/run` installs it) running real turns
//! offline against a stand-in of the Responses API (`common::responses`): `wakebridge codex
//! install` and what wakebridge makes of a Codex session through its hooks (issue 46).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::Value;

use crate::common;
use crate::common::env::test_env;
use crate::common::harness::TestServer;
use crate::common::responses::{REPLY, Responses};

/// A Codex home, a working directory and the private environment both the real Codex and
/// wakebridge run in.
struct Setup {
    root: Arc<tempfile::TempDir>,
    codex_home: PathBuf,
    work: PathBuf,
    env: BTreeMap<String, String>,
}

fn setup(model: &Responses) -> Setup {
    let root = Arc::new(common::tempdir());
    let (codex_home, work) = (root.path().join("codex-home"), root.path().join("work"));
    for dir in [&codex_home, &work, &root.path().join("home")] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(codex_home.join("config.toml"), model.codex_config()).unwrap();
    let env = test_env(
        root.path(),
        &[
            ("CODEX_HOME", &codex_home.display().to_string()),
            ("STUB_API_KEY", "stand-in-key"),
            ("PATH", &std::env::var("PATH").unwrap_or_default()),
        ],
    );
    Setup {
        root,
        codex_home,
        work,
        env,
    }
}

impl Setup {
    /// `wakebridge <args>` in this environment; its standard output.
    fn wakebridge(&self, args: &[&str]) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_wakebridge"))
            .args(args)
            .env_clear()
            .envs(&self.env)
            .output()
            .expect("run wakebridge");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "wakebridge {args:?}: {stdout}\n{stderr}"
        );
        stdout
    }

    /// One `codex exec` turn, its hooks trusted only as config.toml says.
    fn codex_turn(&self, codex: &Path, prompt: &str) {
        let out = Command::new(codex)
            .args(["exec", "--skip-git-repo-check", prompt])
            .current_dir(&self.work)
            .env_clear()
            .envs(&self.env)
            .output()
            .expect("run codex exec");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert!(stdout.contains(REPLY), "{stdout}\n{stderr}");
    }

    /// The sessions the daemon lists in this working directory.
    async fn sessions_here(&self) -> Vec<Value> {
        let server = TestServer::start_in(self.root.clone(), &[], Default::default()).await;
        let sessions = server.get_json("/sessions").await;
        server.stop().await;
        let listed = sessions["sessions"].as_array().cloned().unwrap_or_default();
        let here = self.work.display().to_string();
        listed.into_iter().filter(|s| s["cwd"] == here).collect()
    }
}

/// `wakebridge codex install` wires the hooks, but Codex runs none until they are approved: a
/// turn then leaves no session. With `--trust-hooks` the approval Codex itself would write is
/// in config.toml, and the next turn's SessionStart and Stop hooks run `wakebridge hook --agent
/// codex`: `/sessions` lists a Codex session with its rollout and no pane (Codex's hooks cannot
/// tell one). Uninstall puts both files back as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_install_wires_its_hooks_and_trust_hooks_approves_them() {
    let Some(codex) = common::real_codex() else {
        common::skip_or_fail("codex is not on PATH", common::GET_CODEX);
        return;
    };
    let model = Responses::start().await;
    let setup = setup(&model);
    let config = setup.codex_home.join("config.toml");
    let config_before = std::fs::read(&config).unwrap();

    let said = setup.wakebridge(&["codex", "install"]);
    assert!(said.contains("Hooks need review"), "{said}");
    assert!(setup.codex_home.join("hooks.json").exists());
    assert_eq!(
        std::fs::read(&config).unwrap(),
        config_before,
        "no trust asked for"
    );
    setup.codex_turn(&codex, "say hello");
    assert_eq!(model.requests().len(), 1, "one turn, one request");
    let untrusted = setup.sessions_here().await;
    assert!(untrusted.is_empty(), "hooks ran untrusted: {untrusted:?}");

    let said = setup.wakebridge(&["codex", "install", "--trust-hooks"]);
    assert!(said.contains("4 hooks are approved"), "{said}");
    setup.codex_turn(&codex, "say hello again");
    let sessions = setup.sessions_here().await;
    let [session] = sessions.as_slice() else {
        panic!("one Codex session: {sessions:?}");
    };
    assert_eq!(session["agent"], "codex", "{session}");
    assert_eq!(session["pane"], Value::Null, "{session}");
    assert_eq!(session["last_hook_event"], "Stop", "{session}");
    let transcript = session["transcript_path"].as_str().unwrap_or_default();
    let home = setup.codex_home.display().to_string();
    assert!(
        transcript.starts_with(&home) && transcript.contains("rollout-"),
        "{session}"
    );

    setup.wakebridge(&["codex", "uninstall"]);
    assert!(
        !setup.codex_home.join("hooks.json").exists(),
        "there was none"
    );
    let config_after = String::from_utf8(std::fs::read(&config).unwrap()).unwrap();
    let config_before = String::from_utf8(config_before).unwrap();
    // Codex writes its own settings there too; none of wakebridge's approvals stay.
    assert!(!config_after.contains("hooks.state"), "{config_after}");
    assert!(config_after.starts_with(&config_before), "{config_after}");
}
