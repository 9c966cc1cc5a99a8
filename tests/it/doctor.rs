//! `wakebridge doctor` from the real binary against a real daemon, a real tmux server on a
//! private socket and Claude Code settings on a throwaway HOME: a healthy setup passes (exit 0),
//! and each broken link in turn fails it, naming that link and its fix; a session's inbox line
//! says why it has none, as a warning.

use std::process::Output;

use serde_json::Value;
use wakebridge::wakedir::target::PaneTarget;

use crate::common;
use crate::common::harness::{Daemon, binary, free_port};
use crate::common::tmux::TmuxServer;

const SID: &str = "d0c70f00-0000-4000-8000-000000000001";

/// A machine as a user would have it: hooks installed, Claude Code onboarded, one session
/// mapped to a pane with an agent (a `sleep`, which is not a shell) in it.
struct Setup {
    root: tempfile::TempDir,
    tmux: TmuxServer,
    socket: String,
    pane: String,
}

impl Setup {
    fn new() -> Setup {
        let root = common::tempdir();
        let tmux = TmuxServer::start();
        let socket = tmux.socket().display().to_string();
        let pane = tmux.new_pane("sleep 600");
        let setup = Setup {
            root,
            tmux,
            socket,
            pane,
        };
        setup.install();
        let home = setup.home();
        std::fs::write(
            home.join(".claude.json"),
            r#"{"hasCompletedOnboarding": true}"#,
        )
        .unwrap();
        let wake_dir = setup.root.path().join("wake");
        std::fs::create_dir_all(&wake_dir).unwrap();
        let target = PaneTarget::Tmux {
            pane: setup.pane.clone(),
            session: None,
        };
        wakebridge::wakedir::set_entry(&wake_dir, SID, &target).unwrap();
        setup
    }

    fn home(&self) -> std::path::PathBuf {
        self.root.path().join("home")
    }

    /// `wakebridge claude install`, as a user sets it up.
    fn install(&self) {
        let out = binary(self.root.path(), &[])
            .args(["claude", "install"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }

    fn settings_file(&self) -> std::path::PathBuf {
        self.home().join(".claude").join("settings.json")
    }

    /// Takes `event`'s hooks out of the installed settings.
    fn unwire(&self, event: &str) {
        let text = std::fs::read_to_string(self.settings_file()).unwrap();
        let mut settings: Value = serde_json::from_str(&text).unwrap();
        settings["hooks"].as_object_mut().unwrap().remove(event);
        std::fs::write(self.settings_file(), settings.to_string()).unwrap();
    }

    fn env<'a>(&'a self, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
        let mut env = vec![
            ("AGENT_EVENT_BUS_BRIDGE_BACKEND", "mux"),
            ("WAKEBRIDGE_MUX__TMUX_SOCKET", self.socket.as_str()),
        ];
        env.extend_from_slice(extra);
        env
    }

    async fn daemon(&self, extra: &[(&str, &str)]) -> Daemon {
        let daemon = Daemon::spawn(self.root.path(), &self.env(extra), None);
        daemon.wait_ready(&reqwest::Client::new()).await;
        daemon
    }

    fn doctor(&self, daemon_addr: &str) -> Output {
        binary(self.root.path(), &self.env(&[]))
            .args(["doctor", "--url", &format!("http://{daemon_addr}")])
            .output()
            .unwrap()
    }
}

/// The doctor's lines for `link`, and its exit code.
fn verdict(out: &Output, link: &str) -> (Option<i32>, String) {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mine: Vec<&str> = text
        .lines()
        .skip_while(|l| l.split_whitespace().nth(1) != Some(link))
        .take(2)
        .collect();
    (out.status.code(), mine.join("\n"))
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn a_healthy_setup_passes() {
    let setup = Setup::new();
    let daemon = setup.daemon(&[]).await;
    let out = setup.doctor(&daemon.addr);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.ends_with("a wake would work\n"), "{text}");
    for link in ["hooks", "binary", "daemon", "reach", "panes", "multiplexer"] {
        let (_, line) = verdict(&out, link);
        assert!(line.starts_with("ok "), "{link}: {line}\n{text}");
    }
    assert!(text.contains("1 of 1 mapped pane(s) live"), "{text}");
    assert!(text.contains("tmux on the daemon's PATH"), "{text}");
    // Registration is off in the harness: said, not failed.
    let (_, bus) = verdict(&out, "bus");
    assert!(
        bus.starts_with("warn") && bus.contains("registration is off"),
        "{bus}"
    );
}

#[tokio::test]
async fn a_session_without_an_inbox_is_a_warning_with_the_reason() {
    let setup = Setup::new();
    let daemon = setup.daemon(&[]).await;
    let (_, line) = verdict(&setup.doctor(&daemon.addr), "inbox");
    assert!(
        line.starts_with("warn") && line.contains("no inbox announced"),
        "{line}"
    );
    // Claude Code's registry names the session (this test's process stands in for it).
    let registry = setup.home().join(".claude").join("sessions");
    std::fs::create_dir_all(&registry).unwrap();
    let pid = std::process::id();
    let entry =
        format!(r#"{{"pid":{pid},"sessionId":"{SID}","version":"2.1.100","status":"idle"}}"#);
    std::fs::write(registry.join(format!("{pid}.json")), entry).unwrap();
    let out = setup.doctor(&daemon.addr);
    let (code, line) = verdict(&out, "inbox");
    assert_eq!(code, Some(0), "{}", stdout(&out));
    assert!(
        line.starts_with("warn")
            && line.contains("d0c70f00: Claude Code 2.1.100 has no inbox; wakes are typed")
            && line.contains("fix: update Claude Code to 2.1.224+"),
        "{line}"
    );
}

#[tokio::test]
async fn each_broken_link_fails_by_name_with_its_fix() {
    let setup = Setup::new();

    // Hooks: an event missing from the settings.
    setup.unwire("Stop");
    let daemon = setup.daemon(&[]).await;
    let (code, line) = verdict(&setup.doctor(&daemon.addr), "hooks");
    assert_eq!(code, Some(1));
    assert!(
        line.starts_with("FAIL") && line.contains("Stop not wired"),
        "{line}"
    );
    assert!(line.contains("fix: wakebridge claude install"), "{line}");
    setup.install();

    // The mapped pane is gone.
    let spare = setup.tmux.new_pane("sleep 600");
    setup.tmux.tmux(&["kill-pane", "-t", &setup.pane]);
    let (code, line) = verdict(&setup.doctor(&daemon.addr), "panes");
    assert_eq!(code, Some(1));
    assert!(
        line.starts_with("FAIL") && line.contains("0 of 1"),
        "{line}"
    );
    let target = PaneTarget::Tmux {
        pane: spare,
        session: None,
    };
    let wake_dir = setup.root.path().join("wake");
    wakebridge::wakedir::set_entry(&wake_dir, SID, &target).unwrap();
    assert_eq!(setup.doctor(&daemon.addr).status.code(), Some(0));

    // Nothing mapped.
    let panes = wake_dir.join("panes.json");
    let mapped = std::fs::read(&panes).unwrap();
    std::fs::write(&panes, "{}").unwrap();
    let (code, line) = verdict(&setup.doctor(&daemon.addr), "reach");
    assert_eq!(code, Some(1));
    assert!(
        line.contains("no session to reach") && line.contains("fix:"),
        "{line}"
    );
    std::fs::write(&panes, mapped).unwrap();
    drop(daemon);

    // No daemon.
    let nobody = format!("127.0.0.1:{}", free_port());
    let (code, line) = verdict(&setup.doctor(&nobody), "daemon");
    assert_eq!(code, Some(1));
    assert!(
        line.starts_with("FAIL") && line.contains("not answering"),
        "{line}"
    );
    assert!(line.contains("wakebridge service install"), "{line}");

    // A daemon whose PATH has no tmux (a unit without the user's PATH).
    let blind = setup.daemon(&[("PATH", "/nonexistent")]).await;
    let (code, line) = verdict(&setup.doctor(&blind.addr), "multiplexer");
    assert_eq!(code, Some(1));
    assert!(line.contains("tmux is not on the daemon's PATH"), "{line}");
    drop(blind);

    // A daemon that only spools.
    let spooler = setup
        .daemon(&[("AGENT_EVENT_BUS_BRIDGE_BACKEND", "spool")])
        .await;
    let (code, line) = verdict(&setup.doctor(&spooler.addr), "backend");
    assert_eq!(code, Some(1));
    assert!(
        line.contains("nothing is ever typed") && line.contains("--backend mux"),
        "{line}"
    );
    drop(spooler);

    // Registration on, the bus not there.
    let bus = format!("http://127.0.0.1:{}/mcp", free_port());
    let lonely = setup
        .daemon(&[
            ("WAKEBRIDGE_REGISTRATION__ENABLED", "true"),
            ("AGENT_EVENT_BUS_URL", bus.as_str()),
        ])
        .await;
    let (code, line) = verdict(&setup.doctor(&lonely.addr), "bus");
    assert_eq!(code, Some(1));
    assert!(line.starts_with("FAIL") && line.contains(&bus), "{line}");
}

#[test]
fn doctor_without_home_names_it() {
    let root = common::tempdir();
    let out = binary(root.path(), &[])
        .env_remove("HOME")
        .args(["doctor", "--url", "http://127.0.0.1:9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let (_, hooks) = verdict(&out, "hooks");
    assert!(
        hooks.starts_with("FAIL") && hooks.contains("set HOME"),
        "{hooks}"
    );
}
