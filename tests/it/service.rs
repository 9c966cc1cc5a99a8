//! `wakebridge service install|uninstall|status` as the real binary on a throwaway HOME: the
//! unit and plist it renders (checked by `systemd-analyze verify` and Python's `plistlib`), the
//! calls it makes to `systemctl` / `launchctl` (recording stand-ins first on PATH, since no
//! service manager runs here) and its wait for `/health` of the service's pid, answered by a
//! real daemon the test started. Also the `[bridge] secret_file` the unit points the daemon at,
//! and the plist's `/bin/sh` wrapper that keeps launchd from relaunching an exit 2.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use wakebridge::wire::signature::Secret;

use crate::common::harness::{DEFAULT_EVENT, Daemon, binary, free_port};
use crate::common::process::{ChildGuard, process_is_running};
use crate::common::{self, eventually};

const SECRET: &str = "s3cret-for-the-service-test";
/// A variable set in the installer's environment that must not reach the unit.
const SESSION_VAR: (&str, &str) = ("AGENT_EVENT_BUS_SESSION_ID", "not-for-the-daemon");

/// A directory of stand-ins put first on the installer's PATH; each appends its argv to
/// `calls.log`. `systemctl` and `launchctl` keep the loaded state in a file and answer with the
/// pid written to `pid`.
struct FakeManager {
    dir: tempfile::TempDir,
}

impl FakeManager {
    fn new(pid: u32) -> FakeManager {
        let dir = common::tempdir();
        let d = dir.path().display();
        std::fs::write(dir.path().join("pid"), pid.to_string()).unwrap();
        let systemctl = format!(
            r#"#!/bin/sh
echo "systemctl $*" >> "{d}/calls.log"
case "$*" in
  *" enable "*) touch "{d}/active" ;;
  *" disable "*) rm -f "{d}/active" ;;
  *" show "*)
    if [ -f "{d}/active" ]; then
      printf 'LoadState=loaded\nActiveState=active\nSubState=running\nMainPID=%s\n' "$(cat "{d}/pid")"
    else
      printf 'LoadState=loaded\nActiveState=inactive\nSubState=dead\nMainPID=0\n'
    fi ;;
esac
exit 0
"#
        );
        let launchctl = format!(
            r#"#!/bin/sh
echo "launchctl $*" >> "{d}/calls.log"
case "$1" in
  print)
    [ -f "{d}/active" ] || {{ echo "Could not find service in domain" >&2; exit 113; }}
    printf '%s = {{\n\tstate = running\n\tpid = %s\n\tendpoints = {{\n\t\tpid = 1\n\t}}\n}}\n' "$2" "$(cat "{d}/pid")" ;;
  bootstrap) touch "{d}/active" ;;
  bootout) rm -f "{d}/active" ;;
esac
exit 0
"#
        );
        let journalctl = format!(
            "#!/bin/sh\necho \"journalctl $*\" >> \"{d}/calls.log\"\necho 'fake journal: the last words of the service'\n"
        );
        for (name, text) in [
            ("systemctl", systemctl),
            ("launchctl", launchctl),
            ("journalctl", journalctl),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        FakeManager { dir }
    }

    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("calls.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn clear_calls(&self) {
        let _ = std::fs::remove_file(self.dir.path().join("calls.log"));
    }

    fn path(&self) -> String {
        format!(
            "{}:{}",
            self.dir.path().display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }
}

/// `wakebridge <args>` on `root`'s private environment plus `extra`, with `fake` first on PATH.
async fn wakebridge(
    root: &Path,
    fake: &FakeManager,
    extra: &[(&str, &str)],
    args: &[&str],
) -> Output {
    let mut cmd = binary(root, extra);
    cmd.env("PATH", fake.path()).args(args).stdin(Stdio::null());
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The directory `program` is found in on this process's PATH.
fn dir_of(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).find(|dir| dir.join(program).is_file())
}

/// `systemd-analyze verify --user` of `unit`, or why it cannot run here.
fn systemd_analyze(unit: &Path) -> Result<Output, String> {
    let runs = Command::new("systemd-analyze").arg("--version").output();
    if !runs.is_ok_and(|o| o.status.success()) {
        return Err("systemd-analyze does not run here".into());
    }
    // --user needs a runtime dir to set up its manager; a private one does.
    let runtime = common::tempdir();
    Ok(Command::new("systemd-analyze")
        .args(["verify", "--user"])
        .arg(unit)
        .env("XDG_RUNTIME_DIR", runtime.path())
        .output()
        .unwrap())
}

/// The plist at `path` as JSON, parsed by Python's plistlib (there is no plutil on Linux).
fn parse_plist(path: &Path) -> Value {
    let out = Command::new("python3")
        .args([
            "-c",
            "import json, plistlib, sys; print(json.dumps(plistlib.load(open(sys.argv[1], 'rb'))))",
        ])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "plistlib: {}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test]
async fn systemd_install_status_uninstall_against_a_recording_systemctl() {
    let root = common::tempdir();
    let daemon = Daemon::spawn(root.path(), &[], None);
    let client = reqwest::Client::new();
    daemon.wait_ready(&client).await;
    let pid = daemon.child.0.id();
    let port = daemon.addr.rsplit(':').next().unwrap().to_string();
    let fake = FakeManager::new(pid);
    let env = [
        ("AGENT_EVENT_BUS_BRIDGE_PORT", port.as_str()),
        ("AGENT_EVENT_BUS_BRIDGE_SECRET", SECRET),
        SESSION_VAR,
    ];

    let out = wakebridge(
        root.path(),
        &fake,
        &env,
        &["service", "install", "--platform", "systemd"],
    )
    .await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let unit = root.path().join("config/systemd/user/wakebridge.service");
    let secret_file = root.path().join("config/wakebridge/secret");
    assert!(
        stdout.contains(&format!("wrote {}", unit.display())),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("running as pid {pid}")),
        "{stdout}"
    );
    assert!(stdout.contains(env!("CARGO_PKG_VERSION")), "{stdout}");
    assert!(
        stdout.contains("journalctl --user -u wakebridge"),
        "{stdout}"
    );
    let calls = fake.calls();
    let reload = calls
        .iter()
        .position(|c| c == "systemctl --user daemon-reload");
    let start = calls
        .iter()
        .position(|c| c == "systemctl --user enable --now wakebridge");
    assert!(reload.is_some() && reload < start, "{calls:?}");
    assert!(!calls.iter().any(|c| c.contains("restart")), "{calls:?}");

    // The unit: the binary by absolute path, the secret only by its file, nothing of the session.
    let text_of_unit = std::fs::read_to_string(&unit).unwrap();
    assert!(
        text_of_unit.contains(&format!(
            "ExecStart=\"{}\" \"serve\"\n",
            env!("CARGO_BIN_EXE_wakebridge")
        )),
        "{text_of_unit}"
    );
    assert!(!text_of_unit.contains(SECRET), "{text_of_unit}");
    assert!(!text_of_unit.contains(SESSION_VAR.1), "{text_of_unit}");
    assert!(
        text_of_unit.contains(&format!(
            "Environment=\"WAKEBRIDGE_BRIDGE__SECRET_FILE={}\"\n",
            secret_file.display()
        )),
        "{text_of_unit}"
    );
    assert!(text_of_unit.contains(&format!(
        "Environment=\"AGENT_EVENT_BUS_BRIDGE_PORT={port}\"\n"
    )));
    let home = root.path().join("home");
    let path_line = text_of_unit
        .lines()
        .find(|l| l.starts_with("Environment=\"PATH="))
        .unwrap();
    match dir_of("tmux") {
        Some(tmux_dir) => {
            let first = format!("Environment=\"PATH={}", tmux_dir.display());
            assert!(path_line.starts_with(&first), "{path_line}");
        }
        None => common::skip_or_fail(
            "no tmux on PATH to check the unit's PATH against",
            "`apt-get install tmux` (.ci/run installs it)",
        ),
    }
    assert!(
        path_line.contains(&format!("{}/.cargo/bin:", home.display())),
        "{path_line}"
    );
    assert!(text_of_unit.contains("RestartPreventExitStatus=2\n"));
    assert_eq!(mode(&secret_file), 0o600);
    assert_eq!(
        std::fs::read_to_string(&secret_file).unwrap(),
        format!("{SECRET}\n")
    );

    match systemd_analyze(&unit) {
        Err(why) => common::skip_or_fail(
            &format!("systemd-analyze verify cannot run: {why}"),
            "`apt-get install systemd` (.ci/run installs it)",
        ),
        Ok(verify) => {
            let said = format!("{}{}", text(&verify.stdout), text(&verify.stderr));
            assert!(verify.status.success(), "systemd-analyze verify:\n{said}");
            assert!(
                !said.contains("wakebridge.service"),
                "systemd-analyze verify:\n{said}"
            );
        }
    }

    // Installed again while running: the same file, and a restart so an upgrade takes effect.
    let args = ["service", "install", "--platform", "systemd"];
    let stdout = succeeded(root.path(), &fake, &env, &args).await;
    assert!(stdout.contains("is already this file"), "{stdout}");
    assert!(
        stdout.contains("secret: ") && stdout.contains("(unchanged)"),
        "{stdout}"
    );
    assert!(
        fake.calls()
            .contains(&"systemctl --user restart wakebridge".to_string()),
        "{:?}",
        fake.calls()
    );

    let args = ["service", "status", "--platform", "systemd"];
    let stdout = succeeded(root.path(), &fake, &env, &args).await;
    assert!(
        stdout.contains("installed at") && stdout.contains(&format!("as pid {pid}")),
        "{stdout}"
    );

    let args = ["service", "uninstall", "--platform", "systemd"];
    let stdout = succeeded(root.path(), &fake, &env, &args).await;
    assert_eq!(
        fake.calls(),
        [
            "systemctl --user disable --now wakebridge",
            "systemctl --user daemon-reload"
        ]
    );
    assert!(!unit.exists());
    assert!(secret_file.exists(), "the secret file is kept");
    assert!(
        stdout.contains(&format!("kept the secret file {}", secret_file.display())),
        "{stdout}"
    );

    let out = wakebridge(
        root.path(),
        &fake,
        &env,
        &["service", "uninstall", "--platform", "systemd"],
    )
    .await;
    assert!(out.status.success());
    assert!(
        text(&out.stdout).contains("nothing to do"),
        "{}",
        text(&out.stdout)
    );
    let out = wakebridge(
        root.path(),
        &fake,
        &env,
        &["service", "status", "--platform", "systemd"],
    )
    .await;
    assert!(out.status.success(), "not installed is not a failure");
    assert!(
        text(&out.stdout).contains("no systemd user unit installed"),
        "{}",
        text(&out.stdout)
    );
}

#[tokio::test]
async fn install_fails_naming_the_problem_when_the_service_pid_never_answers() {
    let root = common::tempdir();
    // The service manager's pid is a process that is not a wakebridge.
    let sleeper = ChildGuard::new(Command::new("sleep").arg("600").spawn().unwrap());
    let fake = FakeManager::new(sleeper.0.id());

    // Nothing listens on the port.
    let port = free_port().to_string();
    let env = [("AGENT_EVENT_BUS_BRIDGE_PORT", port.as_str())];
    let args = [
        "service",
        "install",
        "--platform",
        "systemd",
        "--wait",
        "1s",
    ];
    let out = wakebridge(root.path(), &fake, &env, &args).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("did not answer http://127.0.0.1:{port}/health")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("the service runs as pid {}", sleeper.0.id())),
        "{stderr}"
    );
    assert!(
        stderr.contains("fake journal: the last words of the service"),
        "{stderr}"
    );
    let out = wakebridge(
        root.path(),
        &fake,
        &env,
        &["service", "status", "--platform", "systemd"],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(1),
        "installed but not running: {}",
        text(&out.stdout)
    );

    // A daemon answers, but it is not the service's process (an old instance, a manual one).
    let daemon = Daemon::spawn(root.path(), &[], None);
    daemon.wait_ready(&reqwest::Client::new()).await;
    let port = daemon.addr.rsplit(':').next().unwrap().to_string();
    let env = [("AGENT_EVENT_BUS_BRIDGE_PORT", port.as_str())];
    let out = wakebridge(root.path(), &fake, &env, &args).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "answers from pid {}, not the service's pid {}",
            daemon.child.0.id(),
            sleeper.0.id()
        )),
        "{stderr}"
    );
}

#[tokio::test]
async fn launchd_install_writes_a_plist_launchd_can_read_and_bootstraps_it() {
    let root = common::tempdir();
    let daemon = Daemon::spawn(root.path(), &[], None);
    daemon.wait_ready(&reqwest::Client::new()).await;
    let pid = daemon.child.0.id();
    let port = daemon.addr.rsplit(':').next().unwrap().to_string();
    let fake = FakeManager::new(pid);
    let env = [
        ("AGENT_EVENT_BUS_BRIDGE_PORT", port.as_str()),
        ("AGENT_EVENT_BUS_BRIDGE_SECRET", SECRET),
        SESSION_VAR,
    ];
    let home = root.path().join("home");
    let plist = home.join("Library/LaunchAgents/dev.wakebridge.plist");
    // SAFETY: getuid cannot fail and touches no memory.
    let uid = unsafe { libc::getuid() };

    let dry = wakebridge(
        root.path(),
        &fake,
        &env,
        &["service", "install", "--platform", "launchd", "--dry-run"],
    )
    .await;
    assert!(dry.status.success(), "{}", text(&dry.stderr));
    assert!(!plist.exists(), "a dry run writes nothing");
    assert!(!root.path().join("config/wakebridge/secret").exists());
    assert!(text(&dry.stdout).contains(&format!(
        "launchctl bootstrap gui/{uid} {}",
        plist.display()
    )));
    assert!(
        fake.calls()
            .iter()
            .all(|c| c.starts_with("launchctl print")),
        "{:?}",
        fake.calls()
    );

    let out = wakebridge(
        root.path(),
        &fake,
        &env,
        &["service", "install", "--platform", "launchd"],
    )
    .await;
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        text(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("running as pid {pid}")),
        "{stdout}"
    );
    assert!(text(&dry.stdout).contains(std::fs::read_to_string(&plist).unwrap().trim_end()));
    let calls = fake.calls();
    assert!(
        calls.ends_with(&[format!("launchctl bootstrap gui/{uid} {}", plist.display())])
            || calls.contains(&format!(
                "launchctl bootstrap gui/{uid} {}",
                plist.display()
            )),
        "{calls:?}"
    );
    assert!(
        !calls.iter().any(|c| c.contains("bootout")),
        "not loaded before: {calls:?}"
    );
    assert!(home.join("Library/Logs/wakebridge").is_dir());

    let p = parse_plist(&plist);
    assert_eq!(p["Label"], "dev.wakebridge");
    let args = p["ProgramArguments"].as_array().unwrap();
    assert_eq!(args[0], "/bin/sh");
    assert_eq!(args[1], "-c");
    assert_eq!(args[3], env!("CARGO_BIN_EXE_wakebridge"));
    assert_eq!(args[4], "serve");
    assert_eq!(args.len(), 5, "{args:?}");
    assert_eq!(p["KeepAlive"], serde_json::json!({"SuccessfulExit": false}));
    assert_eq!(p["ThrottleInterval"], 10);
    assert_eq!(p["RunAtLoad"], true);
    let vars = &p["EnvironmentVariables"];
    assert_eq!(vars["HOME"], home.display().to_string());
    assert!(vars["PATH"].as_str().unwrap().contains("/opt/homebrew/bin"));
    assert_eq!(
        vars["WAKEBRIDGE_BRIDGE__SECRET_FILE"],
        root.path()
            .join("config/wakebridge/secret")
            .display()
            .to_string()
    );
    assert!(vars.get("AGENT_EVENT_BUS_BRIDGE_SECRET").is_none());
    assert!(vars.get(SESSION_VAR.0).is_none());
    assert!(!std::fs::read_to_string(&plist).unwrap().contains(SECRET));
    assert_eq!(
        p["StandardErrorPath"],
        home.join("Library/Logs/wakebridge/wakebridge.err")
            .display()
            .to_string()
    );

    // Again, with --config: the file differs and is replaced; the loaded job is booted out first.
    let config = root.path().join("my config.toml");
    std::fs::write(&config, "[nudger]\nenabled = true\n").unwrap();
    let stdout = launchd_with_config(root.path(), &fake, &env, "install", &config).await;
    assert!(
        stdout.contains("replaced the different file there"),
        "{stdout}"
    );
    let calls = fake.calls();
    let bootout = calls
        .iter()
        .position(|c| *c == format!("launchctl bootout gui/{uid}/dev.wakebridge"));
    let bootstrap = calls
        .iter()
        .position(|c| c.starts_with("launchctl bootstrap"));
    assert!(bootout.is_some() && bootout < bootstrap, "{calls:?}");
    let p = parse_plist(&plist);
    let args = p["ProgramArguments"].as_array().unwrap();
    assert_eq!(args[5], "--config");
    assert_eq!(args[6], config.display().to_string());

    // A secret file named only in the --config file is one uninstall keeps too, and says so.
    let other_secret = root.path().join("other secret");
    std::fs::write(&other_secret, "s3").unwrap();
    let other_config = root.path().join("other.toml");
    let names_secret = format!("[bridge]\nsecret_file = {:?}\n", other_secret.display());
    std::fs::write(&other_config, names_secret).unwrap();
    let stdout = launchd_with_config(root.path(), &fake, &env, "uninstall", &other_config).await;
    let kept = format!("kept the secret file {}", other_secret.display());
    assert!(stdout.contains(&kept), "{stdout}");
    assert!(
        fake.calls()
            .contains(&format!("launchctl bootout gui/{uid}/dev.wakebridge"))
    );
    assert!(!plist.exists());
}

/// `wakebridge <args>` on fresh recorded calls, which must succeed: its stdout.
async fn succeeded(root: &Path, fake: &FakeManager, env: &[(&str, &str)], args: &[&str]) -> String {
    fake.clear_calls();
    let out = wakebridge(root, fake, env, args).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    stdout
}

/// `wakebridge --config <config> service <verb> --platform launchd`, which must succeed.
async fn launchd_with_config(
    root: &Path,
    fake: &FakeManager,
    env: &[(&str, &str)],
    verb: &str,
    config: &Path,
) -> String {
    let config = config.display().to_string();
    let args = [
        "--config",
        &config,
        "service",
        verb,
        "--platform",
        "launchd",
    ];
    succeeded(root, fake, env, &args).await
}

/// The plist's ProgramArguments script, from the shipped template.
fn wrapper_script() -> String {
    let template = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/wakebridge.plist");
    parse_plist(&template)["ProgramArguments"][2]
        .as_str()
        .unwrap()
        .to_string()
}

/// `/bin/sh -c <the plist's script> wakebridge serve`, as launchd runs it.
fn wrapped(root: &Path, extra: &[(&str, &str)]) -> Command {
    let cmd = binary(root, extra);
    let mut sh = Command::new("/bin/sh");
    sh.env_clear();
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            sh.env(k, v);
        }
    }
    sh.args([
        "-c",
        &wrapper_script(),
        env!("CARGO_BIN_EXE_wakebridge"),
        "serve",
    ])
    .stdin(Stdio::null());
    sh
}

#[tokio::test]
async fn the_launchd_wrapper_turns_exit_2_into_a_clean_exit_and_passes_sigterm_on() {
    let root = common::tempdir();
    std::fs::create_dir_all(root.path().join("run")).unwrap();
    // Exit 2 (a bad setting): launchd must see a clean exit, so KeepAlive does not relaunch.
    let out = wrapped(
        root.path(),
        &[("AGENT_EVENT_BUS_BRIDGE_PORT", "not-a-port")],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("not-a-port"),
        "{}",
        text(&out.stderr)
    );
    // Exit 1 (the port is taken: may clear by itself) stays a failure, so launchd retries.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = wrapped(root.path(), &[("AGENT_EVENT_BUS_BRIDGE_PORT", &port)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    drop(taken);

    // SIGTERM to the shell (launchctl bootout) reaches wakebridge, which stops cleanly.
    let port = free_port().to_string();
    let mut shell = ChildGuard::new(
        wrapped(root.path(), &[("AGENT_EVENT_BUS_BRIDGE_PORT", &port)])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/health");
    assert!(crate::common::harness::wait_healthy(&client, &url, Duration::from_secs(10)).await);
    let health: Value = client.get(&url).send().await.unwrap().json().await.unwrap();
    let daemon_pid = health["pid"].as_u64().unwrap() as i32;
    assert_ne!(
        daemon_pid as u32,
        shell.0.id(),
        "wakebridge runs under the shell"
    );
    // SAFETY: kill(2) on the shell this test started and has not reaped.
    unsafe {
        libc::kill(shell.0.id() as i32, libc::SIGTERM);
    }
    let status = tokio::task::spawn_blocking(move || {
        let status = shell.0.wait().unwrap();
        (status, shell)
    })
    .await
    .unwrap()
    .0;
    assert_eq!(status.code(), Some(0));
    eventually("wakebridge to exit", Duration::from_secs(10), || {
        !process_is_running(daemon_pid)
    })
    .await;
}

#[tokio::test]
async fn the_daemon_refuses_a_secret_file_others_can_read_or_an_empty_or_missing_one() {
    let root = common::tempdir();
    std::fs::create_dir_all(root.path().join("run")).unwrap();
    let file = root.path().join("secret");
    let path = file.display().to_string();
    let serve = |extra: &[(&str, &str)]| {
        let mut cmd = binary(root.path(), extra);
        cmd.args(["serve", "--port", &free_port().to_string()]);
        cmd.output().unwrap()
    };
    let var = ("WAKEBRIDGE_BRIDGE__SECRET_FILE", path.as_str());
    std::fs::write(&file, "s3cret\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = serve(&[var]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&path) && stderr.contains(&format!("chmod 600 {path}")),
        "{stderr}"
    );
    std::fs::write(&file, "").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = serve(&[var]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("is empty"),
        "{}",
        text(&out.stderr)
    );
    std::fs::remove_file(&file).unwrap();
    let out = serve(&[var]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains(&path), "{}", text(&out.stderr));
}

#[tokio::test]
async fn a_daemon_with_a_secret_file_requires_the_signature() {
    let root = common::tempdir();
    let file = root.path().join("secret");
    std::fs::write(&file, format!("{SECRET}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let path = file.display().to_string();
    let daemon = Daemon::spawn(
        root.path(),
        &[("WAKEBRIDGE_BRIDGE__SECRET_FILE", &path)],
        None,
    );
    let client = reqwest::Client::new();
    daemon.wait_ready(&client).await;
    let post = |signature: Option<String>| {
        let mut request = client
            .post(format!("http://{}/hook", daemon.addr))
            .header("content-type", "application/json")
            .body(DEFAULT_EVENT);
        if let Some(signature) = signature {
            request = request.header("X-Event-Bus-Signature", signature);
        }
        request.send()
    };
    assert_eq!(post(None).await.unwrap().status().as_u16(), 401);
    let signed = Secret::new(SECRET).sign(DEFAULT_EVENT.as_bytes());
    assert_eq!(post(Some(signed)).await.unwrap().status().as_u16(), 200);
}
