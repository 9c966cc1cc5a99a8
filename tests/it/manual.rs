//! `wakebridge completions` and `wakebridge man` from the real binary: every verb is in them,
//! and the shell accepts the script.

use std::process::Command;

use crate::common;

const BIN: &str = env!("CARGO_BIN_EXE_wakebridge");

/// The verbs `wakebridge --help` lists, read from the binary itself.
fn verbs() -> Vec<String> {
    let help = Command::new(BIN).arg("--help").output().unwrap();
    let text = String::from_utf8(help.stdout).unwrap();
    let listed = text
        .split("Commands:")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .unwrap();
    let verbs: Vec<String> = listed
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|v| *v != "help")
        .map(str::to_string)
        .collect();
    assert!(verbs.len() > 10, "{text}");
    verbs
}

#[test]
fn bash_completions_know_every_verb_and_parse() {
    let out = Command::new(BIN)
        .args(["completions", "bash"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let script = String::from_utf8(out.stdout).unwrap();
    for verb in verbs() {
        assert!(script.contains(&verb), "no {verb} in the completions");
    }
    let dir = common::tempdir();
    let path = dir.path().join("wakebridge.bash");
    std::fs::write(&path, &script).unwrap();
    let check = Command::new("bash").arg("-n").arg(&path).output().unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
}

#[test]
fn man_pages_cover_every_verb() {
    let page = Command::new(BIN).arg("man").output().unwrap();
    assert!(page.status.success());
    let page = String::from_utf8(page.stdout).unwrap();
    assert!(page.contains(".TH wakebridge 1"), "{page}");
    let dir = common::tempdir();
    let out_dir = dir.path().join("man1");
    let written = Command::new(BIN)
        .arg("man")
        .arg("--out-dir")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(written.status.success());
    for verb in verbs() {
        let page = out_dir.join(format!("wakebridge-{verb}.1"));
        let text = std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{page:?}: {e}"));
        assert!(text.contains(&format!(".TH wakebridge-{verb} 1")), "{text}");
    }
    // Somewhere it cannot write: a clear message and exit 2, not a panic.
    let refused = Command::new(BIN)
        .args(["man", "--out-dir", "/proc/wakebridge-man"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("cannot write man pages"));
}
