//! The wake dir contract against real files, FIFOs, symlinks, flocks and processes: every
//! `panes.json` pathology the reader must survive, the writer's atomicity, modes, eviction and
//! contention, busy-marker ageing, and the `panes` / `wake-state` / `hook` verbs.

use serde_json::{Value, json};
use std::ffi::CString;
use std::fs::{self, File};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};
use wakebridge::claude::hooks::HookInput;
use wakebridge::cli::hook::{HookAction, HookResult, action_for, perform, read_bounded};
use wakebridge::cli::session::{
    MuxKind, PanesClearArgs, PanesCommand, PanesSetArgs, SessionArgs, WakeState, WakeStateArgs,
    execute_panes, execute_wake_state,
};
use wakebridge::telemetry::warn::Warnings;
use wakebridge::wakedir::markers::{marker_path, set_busy};
use wakebridge::wakedir::reader::{
    Condition, NoticeLevel, PANES_READ_CAP_CHARS, Resolution, read_panes_file, resolve,
};
use wakebridge::wakedir::target::PaneTarget;
use wakebridge::wakedir::{
    PanesReader, PanesWriteError, clear_busy, clear_entry, is_busy, set_entry,
};

use crate::common;
use crate::common::process::ChildGuard;

/// How long a read of a planted FIFO may take before the test calls it a hang.
const HANG_LIMIT: Duration = Duration::from_secs(5);
/// Processes and writes per process in the contention test (the reference's 8 × 20).
const WRITER_PROCESSES: usize = 8;
const WRITES_PER_PROCESS: usize = 20;
const CHILD_WRITER_DIR: &str = "WAKEDIR_TEST_CHILD_WRITER_DIR";
const CHILD_WRITER_SID: &str = "WAKEDIR_TEST_CHILD_WRITER_SID";
const CHILD_EMFILE_DIR: &str = "WAKEDIR_TEST_CHILD_EMFILE_DIR";
/// File the EMFILE child creates once it has seen the error, so the parent knows it ran.
const CHILD_EMFILE_PROOF: &str = "WAKEDIR_TEST_CHILD_EMFILE_PROOF";

fn tmux(pane: &str) -> PaneTarget {
    PaneTarget::Tmux {
        pane: pane.into(),
        session: None,
    }
}

fn zellij(pane: &str, session: &str) -> PaneTarget {
    PaneTarget::Zellij {
        pane: pane.into(),
        session: session.into(),
    }
}

fn wake_dir() -> (tempfile::TempDir, PathBuf) {
    let root = common::tempdir();
    let wake = root.path().join("wake");
    fs::create_dir(&wake).expect("wake dir");
    (root, wake)
}

fn write_panes(wake: &Path, bytes: impl AsRef<[u8]>) {
    fs::write(wake.join("panes.json"), bytes).expect("write panes.json");
}

fn read_panes(wake: &Path) -> Value {
    serde_json::from_slice(&fs::read(wake.join("panes.json")).expect("read")).expect("json")
}

fn mkfifo(path: &Path) {
    let c_path = CString::new(path.as_os_str().as_bytes()).expect("path");
    // SAFETY: a valid NUL-terminated path and a mode; mkfifo has no other preconditions.
    let rc = unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) };
    assert_eq!(rc, 0, "mkfifo: {}", std::io::Error::last_os_error());
}

/// Looks `sid` up on a helper thread so a hang fails the test instead of wedging it.
fn lookup_within_limit(reader: PanesReader, sid: &'static str) -> Resolution {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(reader.lookup_detailed(sid));
    });
    receiver
        .recv_timeout(HANG_LIMIT)
        .expect("panes.json lookup hung")
}

fn failed_condition(resolution: &Resolution) -> Option<(Condition, NoticeLevel)> {
    match resolution {
        Resolution::Failed {
            condition, level, ..
        } => Some((*condition, *level)),
        _ => None,
    }
}

/// `sid`'s pane, panes.json read up to `cap_chars` characters.
fn lookup_capped(wake: &Path, cap_chars: usize, sid: &str) -> Resolution {
    let file = read_panes_file(&wake.join("panes.json"), cap_chars);
    resolve(&Warnings::default(), &file, sid)
}

fn temp_files(wake: &Path) -> Vec<String> {
    fs::read_dir(wake)
        .expect("list wake dir")
        .filter_map(std::result::Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".tmp"))
        .collect()
}

fn mode_of(path: &Path) -> u32 {
    fs::metadata(path).expect("stat").permissions().mode() & 0o777
}

fn set_mtime(path: &Path, when: SystemTime) {
    File::options()
        .write(true)
        .open(path)
        .expect("open marker")
        .set_modified(when)
        .expect("set mtime");
}

/// Re-runs this test binary with only `test_name` (a test of this module) selected and `envs`
/// set.
fn spawn_self(test_name: &str, envs: &[(&str, &str)]) -> ChildGuard {
    let exe = std::env::current_exe().expect("current test executable");
    // libtest names a test by its path below the crate root: `wake_dir::<name>`.
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let test_name = format!("{module}::{test_name}");
    let mut command = Command::new(exe);
    command
        .args([
            test_name.as_str(),
            "--exact",
            "--test-threads=1",
            "--nocapture",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (key, value) in envs {
        command.env(key, value);
    }
    ChildGuard::new(command.spawn().expect("spawn child test process"))
}

fn wait_success(mut child: ChildGuard) {
    let status = child.0.wait().expect("wait child");
    let mut stderr = String::new();
    if let Some(mut pipe) = child.0.stderr.take() {
        use std::io::Read;
        let _ = pipe.read_to_string(&mut stderr);
    }
    assert!(status.success(), "child failed: {status}\n{stderr}");
}

// ---------------------------------------------------------------------------------------------
// Reader
// ---------------------------------------------------------------------------------------------

#[test]
fn reads_tmux_zellij_and_legacy_entries() {
    let (_root, wake) = wake_dir();
    write_panes(
        &wake,
        r#"{"a": {"mux": "tmux", "pane": "%3"},
            "b": {"mux": "zellij", "pane": "0", "session": "has:colon"},
            "c": "%9", "_note": "café"}"#,
    );
    let reader = PanesReader::new(&wake);
    assert_eq!(reader.lookup("a"), Some(tmux("%3")));
    assert_eq!(reader.lookup("b"), Some(zellij("0", "has:colon")));
    assert_eq!(reader.lookup("c"), Some(tmux("%9")));
    assert_eq!(reader.lookup("missing"), None);
}

#[test]
fn missing_file_is_quietly_unmapped() {
    let (_root, wake) = wake_dir();
    let reader = PanesReader::new(&wake);
    assert_eq!(reader.lookup_detailed("t"), Resolution::FileMissing);
    let nowhere = PanesReader::new(Path::new("/nonexistent/wake/dir"));
    assert_eq!(nowhere.lookup("t"), None);
}

#[test]
fn malformed_or_wrong_shape_files_are_unmapped() {
    let (_root, wake) = wake_dir();
    let cases: [(&[u8], Condition); 7] = [
        (b"{broken", Condition::Unparseable),
        (b"", Condition::Unparseable),
        (b"\xff\xfe{}", Condition::Unparseable),
        (b"\xef\xbb\xbf{\"t\": \"%1\"}", Condition::Unparseable),
        (br#"["not","an","object"]"#, Condition::NotAnObject),
        (br#""bare string""#, Condition::NotAnObject),
        (b"null", Condition::NotAnObject),
    ];
    for (bytes, expected) in cases {
        write_panes(&wake, bytes);
        let resolution = PanesReader::new(&wake).lookup_detailed("t");
        assert_eq!(
            failed_condition(&resolution),
            Some((expected, NoticeLevel::Warn)),
            "{:?}",
            String::from_utf8_lossy(bytes)
        );
    }
}

#[test]
fn deeply_nested_json_is_unparseable_not_a_crash() {
    let (_root, wake) = wake_dir();
    write_panes(&wake, "[".repeat(100_000));
    let resolution = PanesReader::new(&wake).lookup_detailed("t");
    assert_eq!(
        failed_condition(&resolution).map(|(c, _)| c),
        Some(Condition::Unparseable)
    );
}

#[test]
fn bad_values_nul_and_control_characters_are_unmapped() {
    let (_root, wake) = wake_dir();
    let values = [
        json!(null),
        json!(0),
        json!(""),
        json!("%0\u{0}"),
        json!("%0\n"),
        json!({"mux": "tmux", "pane": "\u{1b}[31m"}),
        json!({"mux": "zellij", "pane": "0"}),
        json!({"mux": "zellij", "pane": "0", "session": "a\u{0}b"}),
    ];
    for value in values {
        write_panes(&wake, json!({"target-1": value}).to_string());
        let resolution = PanesReader::new(&wake).lookup_detailed("target-1");
        assert_eq!(
            failed_condition(&resolution).map(|(c, _)| c),
            Some(Condition::BadPaneValue),
            "{value}"
        );
    }
}

#[test]
fn symlinked_panes_file_is_not_followed() {
    let (root, wake) = wake_dir();
    let outside = root.path().join("outside.json");
    fs::write(&outside, r#"{"t": "%1"}"#).expect("outside");
    std::os::unix::fs::symlink(&outside, wake.join("panes.json")).expect("symlink");
    let resolution = PanesReader::new(&wake).lookup_detailed("t");
    assert_eq!(
        failed_condition(&resolution),
        Some((Condition::Unreadable, NoticeLevel::Warn))
    );
}

#[test]
fn fifo_without_a_writer_reads_as_unparseable_promptly() {
    let (_root, wake) = wake_dir();
    mkfifo(&wake.join("panes.json"));
    let resolution = lookup_within_limit(PanesReader::new(&wake), "t");
    assert_eq!(
        failed_condition(&resolution).map(|(c, _)| c),
        Some(Condition::Unparseable)
    );
}

#[test]
fn fifo_with_a_writer_attached_reads_as_unparseable_promptly() {
    let (_root, wake) = wake_dir();
    let fifo = wake.join("panes.json");
    mkfifo(&fifo);
    // Read-write on a FIFO opens without blocking on Linux and counts as an attached writer.
    let _writer = File::options()
        .read(true)
        .write(true)
        .open(&fifo)
        .expect("attach writer");
    let resolution = lookup_within_limit(PanesReader::new(&wake), "t");
    assert_eq!(
        failed_condition(&resolution).map(|(c, _)| c),
        Some(Condition::Unparseable)
    );
}

#[test]
fn directory_in_place_of_the_file_is_unreadable() {
    let (_root, wake) = wake_dir();
    fs::create_dir(wake.join("panes.json")).expect("dir");
    let resolution = PanesReader::new(&wake).lookup_detailed("t");
    assert_eq!(
        failed_condition(&resolution).map(|(c, _)| c),
        Some(Condition::Unreadable)
    );
}

#[test]
fn file_over_the_read_cap_is_unmapped_and_one_within_it_is_read() {
    let (_root, wake) = wake_dir();
    let small = r#"{"t": "%1"}"#;
    write_panes(&wake, small);
    let exact = lookup_capped(&wake, small.chars().count(), "t");
    assert_eq!(exact, Resolution::Mapped(tmux("%1")));
    write_panes(
        &wake,
        json!({"t": "%1", "_pad": "x".repeat(200)}).to_string(),
    );
    assert_eq!(
        failed_condition(&lookup_capped(&wake, 64, "t")).map(|(c, _)| c),
        Some(Condition::Unparseable)
    );
    assert_eq!(PanesReader::new(&wake).lookup("t"), Some(tmux("%1")));
}

#[test]
fn cap_counts_characters_not_bytes() {
    let (_root, wake) = wake_dir();
    let text = r#"{"t": "%1", "_note": "süßüßüß"}"#;
    write_panes(&wake, text);
    let read = lookup_capped(&wake, text.chars().count(), "t");
    assert_eq!(read, Resolution::Mapped(tmux("%1")));
}

#[test]
fn warn_once_sequence_over_real_files() {
    // 11.2 items 64 and 65 against the real reader.
    let (_root, wake) = wake_dir();
    let reader = PanesReader::new(&wake);
    let panes = wake.join("panes.json");
    let mut levels = Vec::new();
    let mut step = |reader: &PanesReader| {
        levels.push(failed_condition(&reader.lookup_detailed("t")).map(|(_, level)| level));
    };
    fs::create_dir(&panes).unwrap();
    step(&reader);
    fs::remove_dir(&panes).unwrap();
    write_panes(&wake, "[1, 2]");
    step(&reader);
    fs::remove_file(&panes).unwrap();
    fs::create_dir(&panes).unwrap();
    step(&reader);
    fs::remove_dir(&panes).unwrap();
    write_panes(&wake, "{broken");
    step(&reader);
    write_panes(&wake, "[1, 2,");
    step(&reader);
    write_panes(&wake, "{}");
    step(&reader);
    write_panes(&wake, "[1,");
    step(&reader);
    use NoticeLevel::{Debug, Warn};
    assert_eq!(
        levels,
        [
            Some(Warn),
            Some(Warn),
            Some(Warn),
            Some(Warn),
            Some(Debug),
            None,
            Some(Warn)
        ]
    );
}

#[test]
fn warn_cap_bounds_remembered_conditions() {
    let (_root, wake) = wake_dir();
    write_panes(&wake, r#"{"s1": null, "s2": null, "s3": null}"#);
    let (warned, file) = (
        Warnings::with_cap(2),
        read_panes_file(&wake.join("panes.json"), PANES_READ_CAP_CHARS),
    );
    let mut warnings = 0;
    for sid in ["s1", "s2", "s3", "s1"] {
        if failed_condition(&resolve(&warned, &file, sid)).map(|(_, l)| l)
            == Some(NoticeLevel::Warn)
        {
            warnings += 1;
        }
        assert!(warned.remembered() <= 2);
    }
    assert_eq!(warnings, 4);
}

// ---------------------------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------------------------

#[test]
fn set_keeps_other_sessions_and_the_reader_reads_what_the_writer_wrote() {
    let (_root, wake) = wake_dir();
    set_entry(&wake, "sid-1", &tmux("%1")).unwrap();
    set_entry(&wake, "sid-2", &zellij("0", "tenacious-lemur")).unwrap();
    assert_eq!(
        read_panes(&wake),
        json!({"sid-1": {"mux": "tmux", "pane": "%1"},
               "sid-2": {"mux": "zellij", "pane": "0", "session": "tenacious-lemur"}})
    );
    let reader = PanesReader::new(&wake);
    assert_eq!(reader.lookup("sid-2"), Some(zellij("0", "tenacious-lemur")));
}

#[test]
fn set_evicts_only_entries_on_the_same_pane() {
    let (_root, wake) = wake_dir();
    set_entry(&wake, "dead-session", &tmux("%3")).unwrap();
    let live = set_entry(&wake, "live-session", &tmux("%3")).unwrap();
    assert_eq!(live.evicted, ["dead-session"]);
    assert_eq!(
        read_panes(&wake),
        json!({"live-session": {"mux": "tmux", "pane": "%3"}})
    );

    let (_root, wake) = wake_dir();
    assert!(
        set_entry(&wake, "a", &tmux("%1"))
            .unwrap()
            .evicted
            .is_empty()
    );
    assert!(
        set_entry(&wake, "b", &tmux("%2"))
            .unwrap()
            .evicted
            .is_empty()
    );
    assert!(
        set_entry(&wake, "c", &tmux("0"))
            .unwrap()
            .evicted
            .is_empty()
    );
    assert!(
        set_entry(&wake, "d", &zellij("0", "alpha"))
            .unwrap()
            .evicted
            .is_empty()
    );
    assert!(
        set_entry(&wake, "e", &zellij("0", "beta"))
            .unwrap()
            .evicted
            .is_empty()
    );
    assert_eq!(read_panes(&wake).as_object().unwrap().len(), 5);
}

#[test]
fn unparseable_neighbours_are_kept() {
    let (_root, wake) = wake_dir();
    write_panes(&wake, r#"{"broken": null, "_note": "caf\u00e9"}"#);
    let outcome = set_entry(&wake, "sid-1", &tmux("%1")).unwrap();
    assert!(outcome.evicted.is_empty());
    let panes = read_panes(&wake);
    assert_eq!(panes["broken"], Value::Null);
    assert_eq!(panes["_note"], "café");
}

#[test]
fn damaged_content_is_replaced() {
    let (_root, wake) = wake_dir();
    write_panes(&wake, "{not json");
    set_entry(&wake, "sid-1", &tmux("%1")).unwrap();
    assert_eq!(
        read_panes(&wake),
        json!({"sid-1": {"mux": "tmux", "pane": "%1"}})
    );
    write_panes(&wake, b"\xff[1]");
    set_entry(&wake, "sid-1", &tmux("%1")).unwrap();
    assert_eq!(
        read_panes(&wake),
        json!({"sid-1": {"mux": "tmux", "pane": "%1"}})
    );
}

#[test]
fn file_bytes_are_ascii_sorted_and_indented_like_the_reference() {
    let (_root, wake) = wake_dir();
    set_entry(&wake, "sid-2", &tmux("%2")).unwrap();
    set_entry(&wake, "sid-1", &zellij("0", "süß-lemur")).unwrap();
    let bytes = fs::read(wake.join("panes.json")).unwrap();
    assert!(bytes.is_ascii());
    let expected = "{\n  \"sid-1\": {\n    \"mux\": \"zellij\",\n    \"pane\": \"0\",\n    \
                    \"session\": \"s\\u00fc\\u00df-lemur\"\n  },\n  \"sid-2\": {\n    \
                    \"mux\": \"tmux\",\n    \"pane\": \"%2\"\n  }\n}\n";
    assert_eq!(String::from_utf8(bytes).unwrap(), expected);
    assert_eq!(
        PanesReader::new(&wake).lookup("sid-1"),
        Some(zellij("0", "süß-lemur"))
    );
}

#[test]
fn writer_refuses_a_target_the_reader_would_reject() {
    let (_root, wake) = wake_dir();
    let error = set_entry(&wake, "sid-1", &tmux("%1\u{0}")).unwrap_err();
    assert!(matches!(error, PanesWriteError::InvalidTarget(_)));
    assert!(!wake.join("panes.json").exists());
}

#[test]
fn clear_removes_the_session_and_entries_on_its_pane() {
    let (_root, wake) = wake_dir();
    set_entry(&wake, "sid-1", &tmux("%1")).unwrap();
    set_entry(&wake, "sid-2", &tmux("%2")).unwrap();
    let cleared = clear_entry(&wake, "sid-1", None).unwrap();
    assert_eq!(
        (cleared.removed, cleared.existed),
        (vec!["sid-1".to_string()], true)
    );
    assert_eq!(
        read_panes(&wake),
        json!({"sid-2": {"mux": "tmux", "pane": "%2"}})
    );

    set_entry(&wake, "stale", &tmux("%5")).unwrap();
    let cleared = clear_entry(&wake, "sid-9", Some(&tmux("%5"))).unwrap();
    assert_eq!(cleared.removed, ["stale"]);
    assert_eq!(
        read_panes(&wake),
        json!({"sid-2": {"mux": "tmux", "pane": "%2"}})
    );
}

#[test]
fn clear_in_a_missing_dir_creates_nothing() {
    let root = common::tempdir();
    let wake = root.path().join("never-made");
    let cleared = clear_entry(&wake, "sid-1", Some(&tmux("%1"))).unwrap();
    assert!(!cleared.existed && cleared.removed.is_empty());
    assert!(!wake.exists());
}

#[test]
fn clear_without_a_match_does_not_rewrite_the_file() {
    let (_root, wake) = wake_dir();
    write_panes(&wake, "{\"sid-2\":\"%2\"}");
    let cleared = clear_entry(&wake, "sid-1", None).unwrap();
    assert!(cleared.existed && cleared.removed.is_empty());
    assert_eq!(
        fs::read(wake.join("panes.json")).unwrap(),
        b"{\"sid-2\":\"%2\"}"
    );
}

#[test]
fn modes_are_owner_only_even_under_umask_000_and_no_temp_files_remain() {
    let root = common::tempdir();
    let wake = root.path().join("wake");
    fs::create_dir(&wake).unwrap();
    fs::set_permissions(&wake, fs::Permissions::from_mode(0o755)).unwrap();
    // The process umask is shared with concurrently running tests; every mode those tests
    // check is set explicitly by the code under test, so widening it here cannot mask a bug
    // elsewhere, and it is restored at the end.
    // SAFETY: umask has no preconditions.
    let previous = unsafe { libc::umask(0) };
    let result = (|| {
        set_entry(&wake, "sid-1", &tmux("%1"))?;
        set_busy(&wake, "sid-1").map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok::<_, Box<dyn std::error::Error>>(())
    })();
    // SAFETY: as above.
    unsafe { libc::umask(previous) };
    result.unwrap();
    assert_eq!(mode_of(&wake), 0o700, "a 0755 dir is narrowed");
    assert_eq!(mode_of(&wake.join("panes.json")), 0o600);
    assert_eq!(mode_of(&wake.join("panes.lock")), 0o600);
    assert_eq!(mode_of(&wake.join("sid-1.busy")), 0o600);
    assert!(temp_files(&wake).is_empty());
}

#[test]
fn concurrent_writer_processes_lose_no_entry() {
    let (_root, wake) = wake_dir();
    let dir = wake.to_str().unwrap().to_owned();
    let children: Vec<ChildGuard> = (0..WRITER_PROCESSES)
        .map(|n| {
            let sid = format!("writer-{n}");
            spawn_self(
                "child_writer_process",
                &[(CHILD_WRITER_DIR, &dir), (CHILD_WRITER_SID, &sid)],
            )
        })
        .collect();
    for child in children {
        wait_success(child);
    }
    let panes = read_panes(&wake);
    let panes = panes.as_object().unwrap();
    assert_eq!(panes.len(), WRITER_PROCESSES, "{panes:?}");
    for n in 0..WRITER_PROCESSES {
        let last = format!("%w{n}-{}", WRITES_PER_PROCESS - 1);
        assert_eq!(panes[&format!("writer-{n}")]["pane"], Value::String(last));
    }
    assert!(temp_files(&wake).is_empty());
    assert!(wake.join("panes.lock").exists());
}

/// Child side of `concurrent_writer_processes_lose_no_entry`; does nothing in a normal run.
#[test]
fn child_writer_process() {
    let (Ok(dir), Ok(sid)) = (
        std::env::var(CHILD_WRITER_DIR),
        std::env::var(CHILD_WRITER_SID),
    ) else {
        return;
    };
    let n = sid.trim_start_matches("writer-");
    for i in 0..WRITES_PER_PROCESS {
        set_entry(Path::new(&dir), &sid, &tmux(&format!("%w{n}-{i}"))).expect("child write");
    }
}

#[test]
fn read_error_other_than_damage_aborts_without_wiping() {
    // A real EMFILE (reference 11.2 item 111): a child process lowers its descriptor limit so
    // panes.lock still opens but panes.json cannot. Root bypasses permission bits, so an
    // unreadable-by-mode file would not fail here; running out of descriptors fails for root too.
    let (_root, wake) = wake_dir();
    set_entry(&wake, "other-session", &tmux("%7")).unwrap();
    let before = fs::read(wake.join("panes.json")).unwrap();
    let dir = wake.to_str().unwrap().to_owned();
    let proof = _root.path().join("emfile-seen");
    wait_success(spawn_self(
        "child_emfile_writer_process",
        &[
            (CHILD_EMFILE_DIR, &dir),
            (CHILD_EMFILE_PROOF, proof.to_str().unwrap()),
        ],
    ));
    assert!(proof.exists(), "the child never reached the EMFILE check");
    assert_eq!(fs::read(wake.join("panes.json")).unwrap(), before);
    assert!(temp_files(&wake).is_empty());
}

/// Child side of `read_error_other_than_damage_aborts_without_wiping`.
#[test]
fn child_emfile_writer_process() {
    let Ok(dir) = std::env::var(CHILD_EMFILE_DIR) else {
        return;
    };
    let limit = libc::rlimit {
        rlim_cur: 64,
        rlim_max: 64,
    };
    // SAFETY: a valid rlimit struct; this child process exits right after the test.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
    let mut held = Vec::new();
    loop {
        match File::open("/dev/null") {
            Ok(file) => held.push(file),
            Err(e) if e.raw_os_error() == Some(libc::EMFILE) => break,
            Err(e) => panic!("unexpected open error: {e}"),
        }
    }
    drop(held.pop()); // exactly one free descriptor: enough for panes.lock, not for panes.json
    let result = set_entry(Path::new(&dir), "sid-1", &tmux("%1"));
    drop(held);
    match result {
        Err(PanesWriteError::Read { source, .. }) => {
            assert_eq!(source.raw_os_error(), Some(libc::EMFILE));
            let proof = std::env::var(CHILD_EMFILE_PROOF).expect("proof path");
            fs::write(proof, "").expect("write proof");
        }
        other => panic!("expected an EMFILE read error, got {other:?}"),
    }
}

#[test]
fn directory_in_place_of_panes_json_aborts_the_writer_and_is_left_alone() {
    let (_root, wake) = wake_dir();
    fs::create_dir(wake.join("panes.json")).unwrap();
    fs::write(wake.join("panes.json").join("keep"), "x").unwrap();
    let error = set_entry(&wake, "sid-1", &tmux("%1")).unwrap_err();
    assert!(matches!(error, PanesWriteError::Read { .. }), "{error}");
    assert!(wake.join("panes.json").join("keep").exists());
    assert!(temp_files(&wake).is_empty());
}

#[test]
fn symlinked_lock_is_refused_and_its_target_never_created() {
    let (root, wake) = wake_dir();
    let outside = root.path().join("outside.lock");
    std::os::unix::fs::symlink(&outside, wake.join("panes.lock")).unwrap();
    let error = set_entry(&wake, "sid-1", &tmux("%1")).unwrap_err();
    assert!(matches!(error, PanesWriteError::Lock { .. }), "{error}");
    assert!(!outside.exists());
}

#[test]
fn eviction_and_clear_remove_the_unmapped_sessions_markers() {
    let (_root, wake) = wake_dir();
    set_entry(&wake, "dead", &tmux("%3")).unwrap();
    set_busy(&wake, "dead").unwrap();
    set_busy(&wake, "elsewhere").unwrap();
    set_entry(&wake, "live", &tmux("%3")).unwrap();
    assert!(!is_busy(&wake, "dead", f64::INFINITY));
    assert!(is_busy(&wake, "elsewhere", f64::INFINITY));

    set_entry(&wake, "stale", &tmux("%4")).unwrap();
    set_busy(&wake, "stale").unwrap();
    set_busy(&wake, "live").unwrap();
    let cleared = clear_entry(&wake, "live", Some(&tmux("%4"))).unwrap();
    assert_eq!(cleared.removed.len(), 2);
    assert!(!is_busy(&wake, "stale", f64::INFINITY));
    assert!(!is_busy(&wake, "live", f64::INFINITY));
    assert!(is_busy(&wake, "elsewhere", f64::INFINITY));
}

#[test]
fn hostile_keys_in_panes_json_never_reach_paths_outside_the_wake_dir() {
    let (root, wake) = wake_dir();
    let victim = root.path().join("victim.busy");
    fs::write(&victim, "").unwrap();
    write_panes(&wake, r#"{"../victim": "%3"}"#);
    let outcome = set_entry(&wake, "live", &tmux("%3")).unwrap();
    assert_eq!(outcome.evicted, ["../victim"]);
    assert!(
        victim.exists(),
        "a key must not name a marker outside the wake dir"
    );
}

// ---------------------------------------------------------------------------------------------
// Busy markers
// ---------------------------------------------------------------------------------------------

#[test]
fn marker_set_clear_idempotent_and_per_session() {
    let (_root, wake) = wake_dir();
    assert!(!is_busy(&wake, "sid-1", 3600.0));
    set_busy(&wake, "sid-1").unwrap();
    set_busy(&wake, "sid-1").unwrap();
    assert!(is_busy(&wake, "sid-1", 3600.0));
    assert!(!is_busy(&wake, "sid-2", 3600.0));
    let path = marker_path(&wake, "sid-1").unwrap();
    assert_eq!(path.file_name().unwrap(), "sid-1.busy");
    assert!(!path.to_str().unwrap().contains(".jsonl"));
    assert_eq!(fs::metadata(&path).unwrap().len(), 0);
    clear_busy(&wake, "sid-1").unwrap();
    clear_busy(&wake, "sid-1").unwrap();
    assert!(!is_busy(&wake, "sid-1", 3600.0));
}

#[test]
fn marker_ages_out_and_a_refresh_makes_it_busy_again() {
    let (_root, wake) = wake_dir();
    set_busy(&wake, "sid-1").unwrap();
    let path = marker_path(&wake, "sid-1").unwrap();
    set_mtime(&path, SystemTime::now() - Duration::from_secs(7200));
    assert!(!is_busy(&wake, "sid-1", 3600.0));
    assert!(is_busy(&wake, "sid-1", 10_800.0));
    assert!(is_busy(&wake, "sid-1", f64::INFINITY));
    set_busy(&wake, "sid-1").unwrap();
    assert!(
        is_busy(&wake, "sid-1", 60.0),
        "set_busy refreshes the mtime"
    );
}

#[test]
fn ttl_zero_ignores_a_fresh_marker_but_a_future_one_still_gates() {
    let (_root, wake) = wake_dir();
    set_busy(&wake, "sid-1").unwrap();
    assert!(!is_busy(&wake, "sid-1", 0.0));
    let path = marker_path(&wake, "sid-1").unwrap();
    set_mtime(&path, SystemTime::now() + Duration::from_secs(3600));
    assert!(is_busy(&wake, "sid-1", 60.0));
    assert!(is_busy(&wake, "sid-1", 0.0));
}

#[test]
fn unusable_markers_read_as_idle() {
    let (_root, wake) = wake_dir();
    assert!(!is_busy(&wake, "../escape", f64::INFINITY));
    assert!(!is_busy(
        Path::new("/nonexistent/wake"),
        "sid-1",
        f64::INFINITY
    ));
    let file_as_dir = wake.join("file");
    fs::write(&file_as_dir, "").unwrap();
    assert!(
        !is_busy(&file_as_dir, "sid-1", f64::INFINITY),
        "ENOTDIR is idle"
    );
}

// ---------------------------------------------------------------------------------------------
// CLI verbs
// ---------------------------------------------------------------------------------------------

fn env_from(pairs: &[(&str, &str)]) -> wakebridge::env::Env {
    wakebridge::env::Env::from_pairs(pairs.iter().copied())
}

fn session(wake: &Path, sid: Option<&str>) -> SessionArgs {
    SessionArgs {
        session_id: sid.map(str::to_owned),
        wake_dir: Some(wake.to_owned()),
    }
}

fn run(command: &PanesCommand, env: &wakebridge::env::Env) -> (ExitCode, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let wake_dir = command.wake_dir().expect("every test names its wake dir");
    let status = execute_panes(command, wake_dir, env, &mut out, &mut err);
    (status, String::from_utf8_lossy(&out).into_owned())
}

fn set_json(wake: &Path, sid: Option<&str>) -> PanesSetArgs {
    PanesSetArgs {
        session: session(wake, sid),
        json: true,
        ..Default::default()
    }
}

#[test]
fn panes_set_detects_zellij_and_prints_the_entry() {
    let (_root, wake) = wake_dir();
    let env = env_from(&[
        ("ZELLIJ_PANE_ID", "0"),
        ("ZELLIJ_SESSION_NAME", "tenacious-lemur"),
    ]);
    let (status, out) = run(&PanesCommand::Set(set_json(&wake, Some("sid-1"))), &env);
    assert_eq!(status, ExitCode::SUCCESS);
    let printed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        printed["entry"],
        json!({"mux": "zellij", "pane": "0", "session": "tenacious-lemur"})
    );
    assert_eq!(printed["session_id"], "sid-1");
}

#[test]
fn panes_set_outside_a_multiplexer_skips_but_still_clears_the_marker() {
    let (_root, wake) = wake_dir();
    set_busy(&wake, "sid-1").unwrap();
    let (status, out) = run(
        &PanesCommand::Set(set_json(&wake, Some("sid-1"))),
        &env_from(&[]),
    );
    assert_eq!(status, ExitCode::SUCCESS);
    assert!(out.contains("skipped"), "{out}");
    assert!(!wake.join("panes.json").exists());
    assert!(!is_busy(&wake, "sid-1", f64::INFINITY));
}

#[test]
fn panes_set_keep_wake_state_keeps_the_marker_and_maps() {
    let (_root, wake) = wake_dir();
    set_busy(&wake, "sid-1").unwrap();
    let mut args = set_json(&wake, Some("sid-1"));
    args.keep_wake_state = true;
    let (status, _) = run(&PanesCommand::Set(args), &env_from(&[("TMUX_PANE", "%3")]));
    assert_eq!(status, ExitCode::SUCCESS);
    assert!(is_busy(&wake, "sid-1", f64::INFINITY));
    assert_eq!(PanesReader::new(&wake).lookup("sid-1"), Some(tmux("%3")));
}

#[test]
fn panes_set_usage_errors_exit_2() {
    let (_root, wake) = wake_dir();
    let mut zellij_without_session = set_json(&wake, Some("sid-1"));
    zellij_without_session.mux = Some(MuxKind::Zellij);
    zellij_without_session.pane = Some("0".into());
    let (status, _) = run(&PanesCommand::Set(zellij_without_session), &env_from(&[]));
    assert_eq!(status, ExitCode::from(2));
    let (status, _) = run(
        &PanesCommand::Set(set_json(&wake, None)),
        &env_from(&[("TMUX_PANE", "%1")]),
    );
    assert_eq!(status, ExitCode::from(2));
    assert!(!wake.join("panes.json").exists());
}

#[test]
fn panes_set_takes_the_claude_code_session_id_and_prints_text() {
    let (_root, wake) = wake_dir();
    let env = env_from(&[
        ("CLAUDE_CODE_SESSION_ID", "cc-session"),
        ("TMUX_PANE", "%3"),
    ]);
    let args = PanesSetArgs {
        session: session(&wake, None),
        ..Default::default()
    };
    let (status, out) = run(&PanesCommand::Set(args), &env);
    assert_eq!(status, ExitCode::SUCCESS);
    assert_eq!(out, "Mapped cc-session -> tmux pane %3\n");
    let explicit = PanesSetArgs {
        session: session(&wake, Some("sid-9")),
        mux: Some(MuxKind::Tmux),
        pane: Some("%8".into()),
        json: true,
        ..Default::default()
    };
    let (status, _) = run(&PanesCommand::Set(explicit), &env);
    assert_eq!(status, ExitCode::SUCCESS);
    assert_eq!(PanesReader::new(&wake).lookup("sid-9"), Some(tmux("%8")));
}

#[test]
fn panes_clear_and_wake_state_round_trip() {
    let (_root, wake) = wake_dir();
    let env = env_from(&[("TMUX_PANE", "%3")]);
    run(&PanesCommand::Set(set_json(&wake, Some("sid-1"))), &env);
    let state = |state| WakeStateArgs {
        state,
        session: session(&wake, Some("sid-1")),
    };
    let mut err = Vec::new();
    assert_eq!(
        execute_wake_state(&state(WakeState::Busy), &wake, &env, &mut err),
        ExitCode::SUCCESS
    );
    assert!(is_busy(&wake, "sid-1", f64::INFINITY));
    assert_eq!(
        execute_wake_state(&state(WakeState::Idle), &wake, &env, &mut err),
        ExitCode::SUCCESS
    );
    assert!(!is_busy(&wake, "sid-1", f64::INFINITY));
    execute_wake_state(&state(WakeState::Busy), &wake, &env, &mut err);
    let clear = PanesClearArgs {
        session: session(&wake, Some("sid-1")),
        keep_pane_entries: false,
        json: true,
    };
    let (status, out) = run(&PanesCommand::Clear(clear), &env_from(&[]));
    assert_eq!(status, ExitCode::SUCCESS);
    let printed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(printed["removed"], json!(["sid-1"]));
    assert_eq!(read_panes(&wake), json!({}));
    assert!(!is_busy(&wake, "sid-1", f64::INFINITY));
    let no_id = WakeStateArgs {
        state: WakeState::Busy,
        session: session(&wake, None),
    };
    assert_eq!(
        execute_wake_state(&no_id, &wake, &env_from(&[]), &mut err),
        ExitCode::from(2)
    );
}

// ---------------------------------------------------------------------------------------------
// Hook
// ---------------------------------------------------------------------------------------------

fn hook(event: &str) -> HookInput {
    HookInput {
        event_name: event.into(),
        session_id: Some("cc-1".into()),
        cwd: Some("/p".into()),
        transcript_path: Some("/t.jsonl".into()),
        ..Default::default()
    }
}

#[test]
fn hook_events_drive_the_wake_dir() {
    let (_root, wake) = wake_dir();
    let env = env_from(&[("TMUX_PANE", "%5")]);
    let start = HookInput {
        source: Some("startup".into()),
        ..hook("SessionStart")
    };
    let outcome = perform(&start, &wake, &env);
    assert!(
        matches!(outcome.result, HookResult::Done),
        "{:?}",
        outcome.result
    );
    assert_eq!(outcome.pane, Some(tmux("%5")));
    assert_eq!(outcome.cwd.as_deref(), Some("/p"));
    assert_eq!(PanesReader::new(&wake).lookup("cc-1"), Some(tmux("%5")));

    for busy in ["UserPromptSubmit", "PreToolUse"] {
        clear_busy(&wake, "cc-1").unwrap();
        assert_eq!(action_for(&hook(busy)), HookAction::MarkBusy);
        perform(&hook(busy), &wake, &env);
        assert!(is_busy(&wake, "cc-1", 60.0), "{busy}");
    }
    let compact = HookInput {
        source: Some("compact".into()),
        ..hook("SessionStart")
    };
    perform(&compact, &wake, &env);
    assert!(is_busy(&wake, "cc-1", 60.0), "compact keeps the marker");
    perform(&start, &wake, &env);
    assert!(!is_busy(&wake, "cc-1", 60.0), "startup clears the marker");

    for idle in ["Stop", "StopFailure"] {
        set_busy(&wake, "cc-1").unwrap();
        perform(&hook(idle), &wake, &env);
        assert!(!is_busy(&wake, "cc-1", 60.0), "{idle}");
    }
    set_busy(&wake, "cc-1").unwrap();
    let permission = HookInput {
        notification_type: Some("permission_prompt".into()),
        ..hook("Notification")
    };
    perform(&permission, &wake, &env);
    assert!(
        is_busy(&wake, "cc-1", 60.0),
        "other notifications change nothing"
    );
    let idle_prompt = HookInput {
        notification_type: Some("idle_prompt".into()),
        ..hook("Notification")
    };
    perform(&idle_prompt, &wake, &env);
    assert!(!is_busy(&wake, "cc-1", 60.0));

    set_busy(&wake, "cc-1").unwrap();
    let end = perform(&hook("SessionEnd"), &wake, &env);
    assert_eq!(end.unmapped, ["cc-1"]);
    assert_eq!(read_panes(&wake), json!({}));
    assert!(!is_busy(&wake, "cc-1", 60.0));
}

#[test]
fn hook_falls_back_to_env_session_id_and_skips_without_one() {
    let (_root, wake) = wake_dir();
    let mut input = hook("UserPromptSubmit");
    input.session_id = None;
    let outcome = perform(&input, &wake, &env_from(&[]));
    assert!(matches!(outcome.result, HookResult::Skipped));
    let env = env_from(&[("AGENT_EVENT_BUS_SESSION_ID", "bus-1")]);
    let outcome = perform(&input, &wake, &env);
    assert_eq!(outcome.session_id.as_deref(), Some("bus-1"));
    assert!(is_busy(&wake, "bus-1", 60.0));
}

#[test]
fn hook_prefers_the_bus_session_id_over_the_payload_and_the_payload_over_claude_code() {
    let (_root, wake) = wake_dir();
    let mut input = hook("UserPromptSubmit");
    input.session_id = Some("from-payload".into());
    let both = env_from(&[
        ("AGENT_EVENT_BUS_SESSION_ID", "bus-1"),
        ("CLAUDE_CODE_SESSION_ID", "cc-1"),
    ]);
    let outcome = perform(&input, &wake, &both);
    assert_eq!(outcome.session_id.as_deref(), Some("bus-1"));
    assert!(is_busy(&wake, "bus-1", 60.0) && !is_busy(&wake, "from-payload", 60.0));
    let claude_only = env_from(&[
        ("AGENT_EVENT_BUS_SESSION_ID", ""),
        ("CLAUDE_CODE_SESSION_ID", "cc-1"),
    ]);
    let outcome = perform(&input, &wake, &claude_only);
    assert_eq!(outcome.session_id.as_deref(), Some("from-payload"));
    input.session_id = None;
    let outcome = perform(&input, &wake, &claude_only);
    assert_eq!(outcome.session_id.as_deref(), Some("cc-1"));
}

#[test]
fn hook_session_start_outside_a_multiplexer_skips() {
    let (_root, wake) = wake_dir();
    let outcome = perform(&hook("SessionStart"), &wake, &env_from(&[]));
    assert!(matches!(outcome.result, HookResult::Skipped));
    assert!(!wake.join("panes.json").exists());
}

#[test]
fn hook_stdin_that_never_ends_is_abandoned_within_the_budget() {
    // Nothing here is made by a shared helper, and a hang is how this would fail.
    common::timeout::arm_test_timeout();
    let (reader, _writer_kept_open) = std::os::unix::net::UnixStream::pair().unwrap();
    let started = std::time::Instant::now();
    let result = read_bounded(reader, 1024, Duration::from_millis(200));
    assert!(result.is_err());
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[test]
fn hook_marker_write_failure_is_reported_not_raised() {
    let (_root, wake) = wake_dir();
    let file_as_dir = wake.join("file");
    fs::write(&file_as_dir, "").unwrap();
    let outcome = perform(&hook("UserPromptSubmit"), &file_as_dir, &env_from(&[]));
    assert!(
        matches!(outcome.result, HookResult::Failed(_)),
        "{outcome:?}"
    );
}
