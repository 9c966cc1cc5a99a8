//! `wakebridge claude install|uninstall` as a user runs them: the real binary on a throw-away
//! HOME with `CLAUDE_CONFIG_DIR` pointing into it, real files. Installs into no file, `{}`, a
//! file with the user's own hooks and keys, an installed file (nothing changes, no new backup),
//! a custom status line (wrapped, then run as Claude Code runs it: `sh -c` with a real
//! status-line payload on stdin, and a wrapped command that hangs cut off), uninstall byte for
//! byte, uninstall after an edit, a file with comments refused, `--dry-run`, a symlinked file,
//! `--accept-session-messages` set and put back, and a user's own `crossSessionInbound` kept.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wakebridge::claude::hooks::WIRED_EVENTS;

use crate::common;

const EXE: &str = env!("CARGO_BIN_EXE_wakebridge");

/// A status-line payload as Claude Code 2.1 pipes it after a response (42 % of a 1M window).
const STATUS_PAYLOAD: &str = r#"{"session_id":"ac3ea6be-3f07-449d-ba6d-fe455f4016dc","transcript_path":"/h/.claude/projects/-p/ac3ea6be-3f07-449d-ba6d-fe455f4016dc.jsonl","model":{"id":"claude-opus-5-5","display_name":"Opus 5.5"},"context_window":{"total_input_tokens":420000,"total_output_tokens":10,"context_window_size":1000000,"current_usage":{"input_tokens":10,"output_tokens":5,"cache_creation_input_tokens":19990,"cache_read_input_tokens":400000},"used_percentage":42,"remaining_percentage":58},"exceeds_200k_tokens":true}"#;

/// A user's settings with hooks of their own, other keys, a big number and their formatting.
const USERS_OWN: &str = r#"{
    "model": "opus",
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "~/bin/guard.sh", "timeout": 5}]}
        ],
        "Stop": [
            {"matcher": "", "hooks": [{"type": "command", "command": "say done"}]}
        ]
    },
    "env": {"MAX": 123456789012345678901234567890},
    "permissions": {"allow": ["Bash(ls:*)"]}
}"#;

/// One user's machine: a HOME and a Claude Code config dir (not created) inside it.
struct Machine {
    root: tempfile::TempDir,
    dir: PathBuf,
}

impl Machine {
    fn new() -> Machine {
        let root = common::tempdir();
        let dir = root.path().join("home/claude-config");
        Machine { root, dir }
    }

    /// A machine whose Claude Code config dir is the default one, `~/.claude`.
    fn at_home() -> Machine {
        let root = common::tempdir();
        let dir = root.path().join("home/.claude");
        Machine { root, dir }
    }

    /// A machine whose settings file starts as `text`.
    fn with(text: &str) -> Machine {
        let machine = Machine::new();
        std::fs::create_dir_all(&machine.dir).expect("config dir");
        std::fs::write(machine.settings(), text).expect("settings");
        machine
    }

    fn settings(&self) -> PathBuf {
        self.dir.join("settings.json")
    }

    fn bytes(&self) -> Option<Vec<u8>> {
        std::fs::read(self.settings()).ok()
    }

    fn value(&self) -> Value {
        serde_json::from_slice(&self.bytes().expect("settings")).expect("JSON")
    }

    /// Every file in the config dir.
    fn files(&self) -> BTreeSet<String> {
        std::fs::read_dir(&self.dir)
            .map(|dir| {
                dir.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn backups(&self) -> usize {
        self.files().iter().filter(|f| f.ends_with(".bak")).count()
    }

    /// This machine's environment only (and PATH, for `sh`).
    fn env(&self) -> Vec<(String, String)> {
        let dir = self.dir.to_str().expect("utf8");
        let mut env: Vec<_> =
            common::env::test_env(self.root.path(), &[("CLAUDE_CONFIG_DIR", dir)])
                .into_iter()
                .collect();
        env.push(("PATH".into(), std::env::var("PATH").unwrap_or_default()));
        env
    }

    /// The binary with this machine's environment.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(EXE);
        command
            .args(args)
            .env_clear()
            .envs(self.env())
            .stdin(Stdio::null());
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run wakebridge")
    }

    /// `wakebridge claude <verb>`, which must succeed; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let mut all = vec!["claude"];
        all.extend(args);
        let out = self.run(&all);
        assert!(
            out.status.success(),
            "{args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The installed status-line command, run as Claude Code runs it: `sh -c` with `payload` on
    /// stdin and this machine's environment. Its stdout, and how long it took.
    fn run_status_line(&self, payload: &str) -> (String, Duration) {
        let command = self.value()["statusLine"]["command"]
            .as_str()
            .expect("a status-line command")
            .to_owned();
        let mut sh = Command::new("sh");
        sh.arg("-c").arg(&command).env_clear().envs(self.env());
        let started = Instant::now();
        let out = common::harness::fed(sh, payload);
        assert!(out.status.success(), "{command}");
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            started.elapsed(),
        )
    }
}

fn our_hook() -> String {
    format!("{EXE} hook")
}

/// Every command wired to `event`, in order.
fn commands(settings: &Value, event: &str) -> Vec<String> {
    settings["hooks"][event]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|group| group["hooks"].as_array().cloned().unwrap_or_default())
        .filter_map(|hook| hook["command"].as_str().map(str::to_owned))
        .collect()
}

fn assert_fully_installed(settings: &Value) {
    for (event, _) in WIRED_EVENTS {
        let ours = commands(settings, event)
            .iter()
            .filter(|c| **c == our_hook())
            .count();
        assert_eq!(ours, 1, "{event}: {settings:#}");
    }
    let line = settings["statusLine"]["command"].as_str().unwrap_or("");
    assert!(line.starts_with(&format!("{EXE} statusline")), "{line}");
}

#[test]
fn install_into_no_file_creates_it_and_uninstall_removes_it() {
    let machine = Machine::new();
    let out = machine.ok(&["install"]);
    assert!(out.contains("+++ ") && out.contains(&our_hook()), "{out}");
    let settings = machine.value();
    assert_fully_installed(&settings);
    assert_eq!(
        settings["statusLine"],
        json!({"type": "command", "command": format!("{EXE} statusline"), "padding": 0, "refreshInterval": 30})
    );
    let text = String::from_utf8(machine.bytes().expect("file")).expect("utf8");
    assert!(text.starts_with("{\n  \"hooks\": {\n") && text.ends_with("}\n"));
    assert_eq!(machine.backups(), 0, "there was nothing to back up");

    let again = machine.ok(&["install"]);
    let already = format!(
        "already installed in {} (as {EXE})",
        machine.settings().display()
    );
    assert!(again.contains(&already), "{again}");
    assert_eq!(machine.bytes().as_deref(), Some(text.as_bytes()));

    machine.ok(&["uninstall"]);
    assert_eq!(machine.bytes(), None, "there was no file before install");
    assert!(machine.files().is_empty(), "{:?}", machine.files());
    let nothing = machine.ok(&["uninstall"]);
    assert!(nothing.contains("nothing of wakebridge's"), "{nothing}");
}

#[test]
fn install_into_an_empty_object_and_back_byte_for_byte() {
    let machine = Machine::with("{}");
    machine.ok(&["install"]);
    assert_fully_installed(&machine.value());
    assert_eq!(machine.backups(), 1);
    machine.ok(&["uninstall"]);
    assert_eq!(machine.bytes().as_deref(), Some(&b"{}"[..]));
    assert!(!machine.files().iter().any(|f| f.ends_with("install.json")));
}

#[test]
fn the_users_own_hooks_and_keys_are_kept_in_order_and_restored_exactly() {
    let machine = Machine::with(USERS_OWN);
    std::fs::set_permissions(machine.settings(), std::fs::Permissions::from_mode(0o644))
        .expect("chmod");
    machine.ok(&["install"]);
    let settings = machine.value();
    assert_fully_installed(&settings);
    let keys: Vec<&String> = settings.as_object().expect("object").keys().collect();
    assert_eq!(keys, ["model", "hooks", "env", "permissions", "statusLine"]);
    assert_eq!(
        commands(&settings, "PreToolUse"),
        ["~/bin/guard.sh".to_owned(), our_hook()]
    );
    assert_eq!(settings["hooks"]["PreToolUse"][0]["matcher"], "Bash");
    assert_eq!(
        commands(&settings, "Stop"),
        ["say done".to_owned(), our_hook()]
    );
    let text = String::from_utf8(machine.bytes().expect("file")).expect("utf8");
    assert!(text.contains("123456789012345678901234567890"), "{text}");
    let mode = std::fs::metadata(machine.settings())
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644, "the file keeps its mode");
    let backup = machine.dir.join("settings.json.wakebridge-1.bak");
    assert_eq!(std::fs::read_to_string(&backup).expect("backup"), USERS_OWN);

    // Installed already: nothing changes, no new backup.
    let again = machine.ok(&["install"]);
    assert!(again.contains("nothing changed"), "{again}");
    assert_eq!(machine.bytes().as_deref(), Some(text.as_bytes()));
    assert_eq!(machine.backups(), 1);

    machine.ok(&["uninstall"]);
    assert_eq!(machine.bytes().as_deref(), Some(USERS_OWN.as_bytes()));
}

#[test]
fn uninstall_after_a_users_edit_keeps_the_edit() {
    let machine = Machine::with(USERS_OWN);
    machine.ok(&["install"]);
    let mut settings = machine.value();
    settings["model"] = json!("sonnet");
    settings["hooks"]["SessionEnd"]
        .as_array_mut()
        .expect("ours")
        .push(json!({"matcher": "", "hooks": [{"type": "command", "command": "cleanup.sh"}]}));
    std::fs::write(
        machine.settings(),
        serde_json::to_string_pretty(&settings).expect("text"),
    )
    .expect("edit");
    let out = machine.ok(&["uninstall"]);
    assert!(out.contains("your other changes kept"), "{out}");
    let after = machine.value();
    let mut expected: Value = serde_json::from_str(USERS_OWN).expect("json");
    expected["model"] = json!("sonnet");
    expected["hooks"]["SessionEnd"] =
        json!([{"matcher": "", "hooks": [{"type": "command", "command": "cleanup.sh"}]}]);
    assert_eq!(after, expected, "{after:#}");
    assert_eq!(machine.backups(), 2, "install's and uninstall's");
}

#[test]
fn a_custom_status_line_is_wrapped_and_both_lines_show() {
    let own = r#"{"statusLine": {"type": "command", "command": "read -r line; case \"$line\" in *Opus*) echo \"mine: Opus\";; *) echo \"mine: ?\";; esac", "padding": 2}}"#;
    let machine = Machine::with(own);
    machine.ok(&["install"]);
    let settings = machine.value();
    assert_eq!(settings["statusLine"]["padding"], 2);
    let (line, _) = machine.run_status_line(STATUS_PAYLOAD);
    // Their line read the same payload; ours read it too.
    assert_eq!(line.trim_end(), "mine: Opus · ctx 42% · idle", "{line}");
    machine.ok(&["uninstall"]);
    assert_eq!(machine.bytes().as_deref(), Some(own.as_bytes()));
}

#[test]
fn a_wrapped_status_line_that_hangs_is_cut_off() {
    let own = r#"{"statusLine": {"type": "command", "command": "echo partial; sleep 60"}}"#;
    let machine = Machine::with(own);
    machine.ok(&["install"]);
    let (line, took) = machine.run_status_line(STATUS_PAYLOAD);
    assert_eq!(line.trim_end(), "ctx 42% · idle");
    let budget = wakebridge::context::statusline::WRAPPED_BUDGET;
    // The budget, and room for a loaded machine to start and kill the processes.
    assert!(took < budget + Duration::from_secs(5), "took {took:?}");
    assert!(took >= budget, "it waited its budget: {took:?}");
}

#[test]
fn a_file_with_comments_is_refused_and_left_alone() {
    let commented = "{\n  // my model\n  \"model\": \"opus\",\n}\n";
    let machine = Machine::with(commented);
    let before = machine.files();
    for verb in ["install", "uninstall"] {
        let out = machine.run(&["claude", verb]);
        assert_eq!(out.status.code(), Some(1), "{verb}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&machine.settings().display().to_string())
                && err.contains("line 2")
                && err.contains("comments")
                && err.contains("nothing was changed"),
            "{err}"
        );
        assert_eq!(machine.bytes().as_deref(), Some(commented.as_bytes()));
        assert_eq!(machine.files(), before, "no backup, no temp file");
    }
}

#[test]
fn accepting_session_messages_sets_the_key_and_uninstall_puts_back_the_users() {
    let mine = r#"{"crossSessionInbound": "hold", "model": "opus"}"#;
    let machine = Machine::with(mine);
    let out = machine.ok(&["install", "--accept-session-messages"]);
    assert!(out.contains(r#"is now "accept" (it was "hold")"#), "{out}");
    let settings = machine.value();
    assert_fully_installed(&settings);
    assert_eq!(settings["crossSessionInbound"], "accept");
    let keys: Vec<&String> = settings.as_object().expect("object").keys().collect();
    assert_eq!(keys[..2], ["crossSessionInbound", "model"]);
    machine.ok(&["uninstall"]);
    assert_eq!(machine.bytes().as_deref(), Some(mine.as_bytes()));

    // Edited since install: only wakebridge's part goes, the user's "hold" comes back.
    machine.ok(&["install", "--accept-session-messages"]);
    let mut edited = machine.value();
    edited["model"] = json!("sonnet");
    let edited = serde_json::to_string_pretty(&edited).expect("text");
    std::fs::write(machine.settings(), edited).expect("edit");
    machine.ok(&["uninstall"]);
    assert_eq!(
        machine.value(),
        json!({"crossSessionInbound": "hold", "model": "sonnet"})
    );

    // Set where there was none, then an install without the flag: uninstall still unsets it.
    let fresh = Machine::new();
    fresh.ok(&["install", "--accept-session-messages"]);
    let again = fresh.ok(&["install"]);
    assert!(again.contains(r#"already "accept""#), "{again}");
    let mut edited = fresh.value();
    edited["model"] = json!("opus");
    std::fs::write(fresh.settings(), edited.to_string()).expect("edit");
    fresh.ok(&["uninstall"]);
    assert_eq!(fresh.value(), json!({"model": "opus"}));
}

#[test]
fn without_the_flag_a_users_inbound_setting_is_kept_and_the_choice_explained() {
    let mine = r#"{"crossSessionInbound": "hold"}"#;
    let machine = Machine::with(mine);
    let out = machine.ok(&["install"]);
    assert!(
        out.contains(r#"crossSessionInbound is "hold", your own setting; left as it is"#),
        "{out}"
    );
    assert!(out.contains("--accept-session-messages"), "{out}");
    assert_eq!(machine.value()["crossSessionInbound"], "hold");
    let unset = Machine::new();
    let out = unset.ok(&["install"]);
    assert!(out.contains("crossSessionInbound is unset"), "{out}");
    assert!(out.contains("bypass mode"), "{out}");
    assert!(out.contains("--accept-session-messages"), "{out}");
    assert!(unset.value().get("crossSessionInbound").is_none());
}

#[test]
fn a_dry_run_prints_the_diff_and_changes_nothing() {
    let machine = Machine::with(USERS_OWN);
    let out = machine.ok(&["install", "--dry-run"]);
    assert!(
        out.contains(&format!("+            \"command\": \"{EXE} hook\"")),
        "{out}"
    );
    assert!(out.contains("dry run"), "{out}");
    assert_eq!(machine.bytes().as_deref(), Some(USERS_OWN.as_bytes()));
    assert_eq!(machine.files().len(), 1);
    machine.ok(&["install"]);
    let installed = machine.bytes();
    let files = machine.files();
    let out = machine.ok(&["uninstall", "--dry-run"]);
    assert!(
        out.contains(&format!("-            \"command\": \"{EXE} hook\"")),
        "{out}"
    );
    assert_eq!(machine.bytes(), installed);
    assert_eq!(machine.files(), files);
    // Nothing there yet: a dry run creates no directory either.
    let empty = Machine::new();
    empty.ok(&["install", "--dry-run"]);
    assert!(!empty.dir.exists());
}

#[test]
fn a_symlinked_settings_file_stays_a_link() {
    let machine = Machine::new();
    let dotfiles = machine.root.path().join("dotfiles");
    std::fs::create_dir_all(&dotfiles).expect("dotfiles");
    std::fs::create_dir_all(&machine.dir).expect("dir");
    let real = dotfiles.join("settings.json");
    std::fs::write(&real, "{}\n").expect("real");
    std::os::unix::fs::symlink(&real, machine.settings()).expect("link");
    machine.ok(&["install"]);
    let meta = std::fs::symlink_metadata(machine.settings()).expect("meta");
    assert!(meta.file_type().is_symlink());
    assert_fully_installed(&machine.value());
    machine.ok(&["uninstall"]);
    assert_eq!(std::fs::read(&real).expect("real"), b"{}\n");
    assert!(
        std::fs::symlink_metadata(machine.settings()).is_ok_and(|m| m.file_type().is_symlink())
    );
}

/// `Path` of the config dir exists after an install into nothing (the harness's HOME does not).
#[test]
fn claude_config_dir_is_honoured() {
    let machine = Machine::new();
    machine.ok(&["install"]);
    assert!(machine.settings().is_file());
    let default_place: &Path = &machine.root.path().join("home/.claude/settings.json");
    assert!(!default_place.exists(), "~/.claude is not touched");
}

#[test]
fn a_hand_merged_snippet_is_updated_in_place_not_duplicated() {
    // What the README used to say: deploy/'s two snippets merged by hand.
    let mut by_hand: Value =
        serde_json::from_str(include_str!("../../deploy/claude-hooks.json")).expect("hooks");
    let line: Value =
        serde_json::from_str(include_str!("../../deploy/claude-statusline.json")).expect("line");
    by_hand["statusLine"] = line["statusLine"].clone();
    by_hand["hooks"]["Stop"][0]["hooks"]
        .as_array_mut()
        .expect("stop")
        .insert(0, json!({"type": "command", "command": "say done"}));
    let machine = Machine::with(&serde_json::to_string_pretty(&by_hand).expect("text"));
    machine.ok(&["install"]);
    let settings = machine.value();
    assert_fully_installed(&settings);
    assert_eq!(
        commands(&settings, "Stop"),
        ["say done".to_owned(), our_hook()]
    );
    assert_eq!(
        settings["statusLine"]["command"],
        format!("{EXE} statusline")
    );
    // Uninstall takes ours out; the keys it did not create stay, emptied.
    machine.ok(&["uninstall"]);
    let after = machine.value();
    assert_eq!(commands(&after, "Stop"), ["say done"]);
    assert_eq!(after["hooks"]["SessionStart"], json!([]));
    assert!(after.get("statusLine").is_none());
}

/// The real Claude Code, started in tmux on settings that `wakebridge claude install` wrote over
/// a status line of the user's: its SessionStart hook (the installed absolute command) maps the
/// pane, and its status bar shows the user's line with ours added.
#[tokio::test]
async fn the_real_claude_code_runs_the_installed_hooks_and_status_line() {
    let Some(claude) = common::real_claude() else {
        common::skip_or_fail("no `claude` on PATH", common::GET_CLAUDE);
        return;
    };
    let tmux = common::tmux::TmuxServer::start();
    let machine = Machine::at_home();
    let (home, work) = (
        machine.root.path().join("home"),
        machine.root.path().join("work"),
    );
    let theirs = json!({"statusLine": {"type": "command", "command": "echo mine-line"}});
    common::claude_home(&home, &work, &theirs);
    machine.ok(&["install"]);
    let mut words: Vec<String> = common::env::test_env(machine.root.path(), &[])
        .into_iter()
        .map(|(k, v)| format!("{k}='{v}'"))
        .collect();
    words.extend([
        "TERM=xterm-256color".into(),
        "PATH=/usr/bin:/bin".into(),
        "TMUX=\"$TMUX\"".into(),
        "TMUX_PANE=\"$TMUX_PANE\"".into(),
        format!("ANTHROPIC_API_KEY={}", common::CLAUDE_TEST_KEY),
    ]);
    let pane = tmux.new_pane_in(
        &work,
        &format!(
            "env -i {} '{}'; exec sleep 600",
            words.join(" "),
            claude.display()
        ),
    );
    let panes = machine.root.path().join("wake/panes.json");
    common::eventually(
        "the installed SessionStart hook to map the pane",
        Duration::from_secs(90),
        || std::fs::read_to_string(&panes).is_ok_and(|text| text.contains(&pane)),
    )
    .await;
    let screen = || tmux.tmux(&["capture-pane", "-p", "-t", &pane]);
    // Claude Code draws its first screen (status bar included) well after the hook ran.
    common::eventually("the wrapped status line", Duration::from_secs(60), || {
        screen().contains("mine-line \u{b7} ctx")
    })
    .await;
}

#[test]
fn a_moved_binary_updates_its_entries_and_uninstall_still_restores_exactly() {
    let machine = Machine::with(USERS_OWN);
    machine.ok(&["install"]);
    // The same binary at a new place with a space in it (a hard link: no 170 MB copy, and so
    // on the target dir's file system, which a tmpfs /tmp is not).
    let target_tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let moved_dir = target_tmp.path().join("new place");
    std::fs::create_dir_all(&moved_dir).expect("dir");
    let moved = moved_dir.join("wakebridge");
    std::fs::hard_link(EXE, &moved).expect("link the binary");
    let run_moved = |verb: &str| {
        let out = Command::new(&moved)
            .args(["claude", verb])
            .env_clear()
            .envs(machine.env())
            .output()
            .expect("run the moved binary");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run_moved("install");
    let settings = machine.value();
    let quoted = format!("'{}' hook", moved.display());
    for (event, _) in WIRED_EVENTS {
        let ours: Vec<String> = commands(&settings, event)
            .into_iter()
            .filter(|c| c.contains("wakebridge"))
            .collect();
        assert_eq!(ours, std::slice::from_ref(&quoted), "{event}");
    }
    assert_eq!(commands(&settings, "Stop")[0], "say done");
    run_moved("uninstall");
    assert_eq!(machine.bytes().as_deref(), Some(USERS_OWN.as_bytes()));
}

#[test]
fn the_path_written_is_the_link_path_finds_not_the_versioned_file_behind_it() {
    // As Homebrew or Nix install it: bin/wakebridge, a link to a versioned file.
    let machine = Machine::new();
    let bin = machine.root.path().join("brew/bin");
    std::fs::create_dir_all(&bin).expect("bin dir");
    let link = bin.join("wakebridge");
    std::os::unix::fs::symlink(EXE, &link).expect("link");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = machine
        .command(&["claude", "install"])
        .env("PATH", &path)
        .output()
        .expect("install");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let settings = machine.value();
    let hook = format!("{} hook", link.display());
    assert_eq!(commands(&settings, "Stop"), [hook]);
    // A wakebridge first on PATH that is another binary is not taken for this one.
    let other = machine.root.path().join("other/bin");
    std::fs::create_dir_all(&other).expect("dir");
    std::fs::write(other.join("wakebridge"), "#!/bin/sh\n").expect("other binary");
    let machine = Machine::new();
    let path = format!(
        "{}:{}",
        other.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = machine
        .command(&["claude", "install"])
        .env("PATH", &path)
        .output()
        .expect("install");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(commands(&machine.value(), "Stop"), [our_hook()]);
}
