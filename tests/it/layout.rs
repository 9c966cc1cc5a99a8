//! The tree is the architecture: `src/lib.rs`'s `# Layout` map lists the modules in dependency
//! order, and no production code imports a module listed before its own (so there is no cycle
//! either). A new upward import fails here with the file that has it.

use std::path::{Path, PathBuf};

/// The top-level modules in the order the map lists them (`cli/`, `deadline.rs`, ...).
fn mapped_order(lib: &str) -> Vec<String> {
    let map = lib
        .split("```text")
        .nth(1)
        .and_then(|m| m.split("```").next());
    map.expect("lib.rs has a ```text layout map")
        .lines()
        .filter_map(|line| line.strip_prefix("//!   "))
        .filter_map(|line| line.split_whitespace().next())
        .map(|name| {
            name.trim_end_matches('/')
                .trim_end_matches(".rs")
                .to_string()
        })
        .filter(|name| name != "main")
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Production text of a file: unit-test modules and test-only files left out, comments dropped.
fn production(path: &Path) -> String {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if name == "tests.rs" {
        return String::new();
    }
    let text = std::fs::read_to_string(path).expect("read source");
    let text = text
        .split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap_or_default();
    text.lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn no_module_imports_one_listed_before_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let order = mapped_order(&std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs"));
    assert!(order.len() > 10, "layout map not found: {order:?}");
    let rank = |m: &str| order.iter().position(|o| o == m);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut upward = Vec::new();
    for file in files {
        let rel = file.strip_prefix(&src).expect("under src");
        let own = rel.components().next().and_then(|c| c.as_os_str().to_str());
        let own = own.unwrap_or_default().trim_end_matches(".rs");
        let Some(own_rank) = rank(own) else {
            assert!(
                ["lib", "main"].contains(&own),
                "{own} is missing from lib.rs's layout map"
            );
            continue;
        };
        for used in production(&file).split("crate::").skip(1) {
            let used: String = used
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if rank(&used).is_some_and(|r| r < own_rank) {
                upward.push(format!("{} uses crate::{used}", rel.display()));
            }
        }
    }
    upward.dedup();
    assert!(
        upward.is_empty(),
        "imports against the layout map:\n{}",
        upward.join("\n")
    );
}

/// The string literals of a file's production code (comments and unit tests left out), one per
/// line they start on.
fn literals(path: &Path) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (at, line) in production(path).lines().enumerate() {
        let mut quoted = line.split('"').skip(1).step_by(2);
        found.extend(quoted.by_ref().map(|text| (at + 1, text.to_owned())));
    }
    found
}

/// Issue 46's seam: what an agent's files, environment and hooks are called is its own module's
/// (`claude/`, `codex/`) to know. The session loop, delivery, the budget, the context monitor and
/// the views ask `agent::Side`; none of them spells an agent's file or variable.
#[test]
fn only_the_agents_own_modules_spell_their_files_and_variables() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let agent_words = [
        ".claude",
        ".codex",
        "settings.json",
        "hooks.json",
        "CLAUDE_",
        "CODEX_",
        "rollout",
        "subagents",
        "app-server",
        "projects",
    ];
    let mut files = Vec::new();
    for dir in ["session", "delivery", "budget", "context"] {
        rust_files(&src.join(dir), &mut files);
    }
    files.extend(["api.rs", "cli/glance.rs"].map(|f| src.join(f)));
    let mut spelled = Vec::new();
    for file in &files {
        for (line, text) in literals(file) {
            if let Some(word) = agent_words.iter().find(|w| text.contains(*w)) {
                let rel = file.strip_prefix(&src).unwrap_or(file).display();
                spelled.push(format!("{rel}:{line} spells {word:?}: \"{text}\""));
            }
        }
    }
    // The same scan finds them where they belong: it can fail.
    let own = literals(&src.join("codex/home.rs"));
    assert!(
        own.iter().any(|(_, text)| text.contains("CODEX_")),
        "{own:?}"
    );
    assert!(
        spelled.is_empty(),
        "agent names outside claude/ and codex/:\n{}",
        spelled.join("\n")
    );
}

/// The seam in the code's own paths: the session loop, delivery, the budget, the context monitor,
/// the views and the shared words (`reading/`) reach an agent's module only through `agent::`.
#[test]
fn only_the_seam_reaches_an_agents_module() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for dir in [
        "session", "delivery", "budget", "context", "reading", "http",
    ] {
        rust_files(&src.join(dir), &mut files);
    }
    files.extend(["api.rs", "cli/glance.rs"].map(|f| src.join(f)));
    let names_an_agent = |line: &str| line.contains("claude::") || line.contains("codex::");
    let mut named = Vec::new();
    for file in &files {
        for (at, line) in production(file).lines().enumerate() {
            if names_an_agent(line) {
                let rel = file.strip_prefix(&src).unwrap_or(file).display();
                named.push(format!("{rel}:{}: {}", at + 1, line.trim()));
            }
        }
    }
    // The same scan finds them where they belong: it can fail.
    let adapter = production(&src.join("agent/claude.rs"));
    assert!(adapter.lines().any(names_an_agent), "{adapter}");
    assert!(
        named.is_empty(),
        "agent modules named outside the seam:\n{}",
        named.join("\n")
    );
}
