//! Codex CLI's hooks as wakebridge wires them, and how Codex trusts a hook. Codex reads
//! `$CODEX_HOME/hooks.json` in Claude Code's shape and gives its hooks the same payload fields,
//! but runs a new or changed hook only once a person approved it ("Hooks need review" at the
//! TUI's start); the approval is a line in `config.toml`:
//!
//! ```toml
//! [hooks.state."/home/u/.codex/hooks.json:stop:1:0"]
//! trusted_hash = "sha256:97f7…"
//! ```
//!
//! The key is the hooks file's path, the event in snake case, the group's and the handler's
//! index; the hash is SHA-256 over the handler as compact JSON with its keys sorted:
//! `{"event_name","hooks":[{"async","command","timeout","type"}],"matcher"}`, `matcher` only for
//! the events that have one. Checked against Codex 0.171.0's own `hooks/list` for every event
//! wired here, and by running the real Codex with no other trust (`tests/it/codex.rs`).

use std::path::Path;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use toml_edit::{DocumentMut, Item, Table};

use crate::claude::settings::Wiring;

/// `(event, matcher)`: Codex matches SessionStart on its source and PreToolUse on the tool, and
/// has no matcher for UserPromptSubmit and Stop (one written there is not part of the hash).
pub const WIRED_EVENTS: [(&str, Option<&str>); 4] = [
    ("SessionStart", Some("")),
    ("UserPromptSubmit", None),
    ("PreToolUse", Some("")),
    ("Stop", None),
];

/// What Codex's hooks.json is wired with: the hook names its agent, since Codex's hooks run in
/// a shared app-server and nothing else in their environment says whose they are.
pub const WIRING: Wiring = Wiring {
    events: &WIRED_EVENTS,
    hook_args: " --agent codex",
    statusline: false,
};

/// One hook's approval, as Codex's own review writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// `<hooks file>:<event in snake case>:<group>:<handler>`.
    pub key: String,
    /// `sha256:<hex>`.
    pub hash: String,
}

/// The approvals of every handler in the hooks file `bytes` (at `path`, as Codex names it) that
/// runs exactly `command`, for the events `WIRED_EVENTS` names. A file that is not JSON (or not
/// in the hooks shape) has none: install checks its shape before this.
pub fn approvals(path: &Path, bytes: &[u8], command: &str) -> Vec<Approval> {
    let root: Value = serde_json::from_slice(bytes).unwrap_or_default();
    let mut found = Vec::new();
    for (event, matcher) in WIRED_EVENTS {
        let groups = root["hooks"][event].as_array().into_iter().flatten();
        for (g, group) in groups.enumerate() {
            let handlers = group["hooks"].as_array().into_iter().flatten();
            for (h, handler) in handlers.enumerate() {
                let ours = handler["type"] == "command" && handler["command"] == command;
                let Some(timeout) = handler["timeout"].as_u64().filter(|_| ours) else {
                    continue;
                };
                let snake = snake_case(event);
                let mut hashed = json!({
                    "event_name": snake,
                    "hooks": [{"async": false, "command": command, "timeout": timeout,
                               "type": "command"}],
                });
                if matcher.is_some() {
                    let matcher = group["matcher"].as_str().unwrap_or_default();
                    hashed["matcher"] = Value::String(matcher.to_owned());
                }
                // The keys above are written in sorted order, and kept so (`preserve_order`).
                let canonical = hashed.to_string();
                found.push(Approval {
                    key: format!("{}:{snake}:{g}:{h}", path.display()),
                    hash: format!("sha256:{}", hex::encode(Sha256::digest(canonical))),
                });
            }
        }
    }
    found
}

/// `PreToolUse` → `pre_tool_use`.
fn snake_case(event: &str) -> String {
    let mut out = String::new();
    for c in event.chars() {
        if c.is_ascii_uppercase() && !out.is_empty() {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("it is not TOML Codex can read ({0}); fix it and run this again")]
    NotToml(String),
    #[error("its \"hooks\" or \"hooks.state\" is not a table; fix or remove it")]
    NotTable,
}

/// `config.toml` (`None`: no file) with each approval written; `None`: all were there already.
/// Everything else in the file, comments and order included, stays as it was.
pub fn trust(
    current: Option<&[u8]>,
    approvals: &[Approval],
) -> Result<Option<Vec<u8>>, TrustError> {
    let mut doc = parse(current)?;
    let before = doc.to_string();
    let state = state_mut(&mut doc)?;
    for Approval { key, hash } in approvals {
        let mut entry = Table::new();
        entry.insert("trusted_hash", toml_edit::value(hash.as_str()));
        state.insert(key, Item::Table(entry));
    }
    let after = doc.to_string();
    Ok((after != before).then(|| after.into_bytes()))
}

/// `config.toml` without the approvals still as install wrote them (one the user or Codex
/// changed since is theirs), and without `hooks.state` and `hooks` when that leaves them empty;
/// `None`: none was there.
pub fn distrust(current: &[u8], approvals: &[Approval]) -> Result<Option<Vec<u8>>, TrustError> {
    let mut doc = parse(Some(current))?;
    let state = doc
        .get_mut("hooks")
        .and_then(|hooks| hooks.get_mut("state"))
        .and_then(Item::as_table_like_mut);
    let Some(state) = state else {
        return Ok(None);
    };
    let mut removed = false;
    for Approval { key, hash } in approvals {
        let written = state.get(key).and_then(|e| e.get("trusted_hash")?.as_str());
        if written == Some(hash.as_str()) {
            state.remove(key);
            removed = true;
        }
    }
    if !removed {
        return Ok(None);
    }
    let hooks = doc.get_mut("hooks").and_then(Item::as_table_like_mut);
    if let Some(hooks) = hooks {
        if hooks
            .get("state")
            .and_then(Item::as_table_like)
            .is_some_and(toml_edit::TableLike::is_empty)
        {
            hooks.remove("state");
        }
        if hooks.is_empty() {
            doc.remove("hooks");
        }
    }
    Ok(Some(doc.to_string().into_bytes()))
}

/// How many of `approvals` the config file `config` holds as written: approvals Codex honours.
pub fn approved(config: &[u8], approvals: &[Approval]) -> usize {
    let Ok(doc) = parse(Some(config)) else {
        return 0;
    };
    let state = doc.get("hooks").and_then(|hooks| hooks.get("state"));
    let holds = |Approval { key, hash }: &&Approval| {
        let written = state.and_then(|s| s.get(key)?.get("trusted_hash")?.as_str());
        written == Some(hash.as_str())
    };
    approvals.iter().filter(holds).count()
}

fn parse(current: Option<&[u8]>) -> Result<DocumentMut, TrustError> {
    let text = std::str::from_utf8(current.unwrap_or_default())
        .map_err(|e| TrustError::NotToml(e.to_string()))?;
    text.parse::<DocumentMut>()
        .map_err(|e| TrustError::NotToml(e.message().to_owned()))
}

/// `[hooks.state]`, made (implicit, so no empty header is written) when missing.
fn state_mut(doc: &mut DocumentMut) -> Result<&mut Table, TrustError> {
    let implicit = || {
        let mut table = Table::new();
        table.set_implicit(true);
        Item::Table(table)
    };
    let hooks = doc.entry("hooks").or_insert_with(implicit);
    let hooks = hooks.as_table_mut().ok_or(TrustError::NotTable)?;
    let state = hooks.entry("state").or_insert_with(implicit);
    state.as_table_mut().ok_or(TrustError::NotTable)
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMAND: &str = "/x/wakebridge hook";

    fn file(groups: Value) -> Vec<u8> {
        json!({"hooks": groups}).to_string().into_bytes()
    }

    /// The hashes Codex 0.171.0's own `hooks/list` reported for `/x/wakebridge hook` with a
    /// timeout of 10 in `/tmp/cx1/cxhome/hooks.json`, each the only group of its event.
    #[test]
    fn each_wired_event_hashes_as_codex_itself_does() {
        let group = |matcher: Option<&str>| {
            let hook = json!({"type": "command", "command": COMMAND, "timeout": 10});
            match matcher {
                Some(m) => json!([{"matcher": m, "hooks": [hook]}]),
                None => json!([{"hooks": [hook]}]),
            }
        };
        let groups: serde_json::Map<String, Value> = (WIRED_EVENTS.iter())
            .map(|(event, matcher)| ((*event).to_owned(), group(*matcher)))
            .collect();
        let path = Path::new("/tmp/cx1/cxhome/hooks.json");
        let found = approvals(path, &file(Value::Object(groups)), COMMAND);
        let seen: Vec<(&str, &str)> = (found.iter())
            .map(|a| (a.key.as_str(), &a.hash[..20]))
            .collect();
        assert_eq!(
            seen,
            [
                (
                    "/tmp/cx1/cxhome/hooks.json:session_start:0:0",
                    "sha256:5623b8590663e"
                ),
                (
                    "/tmp/cx1/cxhome/hooks.json:user_prompt_submit:0:0",
                    "sha256:57c102415fe86"
                ),
                (
                    "/tmp/cx1/cxhome/hooks.json:pre_tool_use:0:0",
                    "sha256:bca6d48c76677"
                ),
                (
                    "/tmp/cx1/cxhome/hooks.json:stop:0:0",
                    "sha256:97f7ad26bcf5a"
                ),
            ]
        );
    }

    /// A `wakebridge hook` pasted by hand would run as Claude Code's hook (its pane, bus id and
    /// keep flag read from Codex's shared app-server): install names the agent in it.
    #[test]
    fn install_names_the_agent_in_a_hook_of_ours_that_lacks_it() {
        use crate::claude::settings::{Install, install};
        let pasted = file(
            json!({"Stop": [{"hooks": [{"type": "command", "timeout": 10,
            "command": "/x/wakebridge hook"}]}]}),
        );
        let Install::Changed { bytes, .. } =
            install(Some(&pasted), "/x/wakebridge", &WIRING, false).unwrap()
        else {
            panic!("unchanged");
        };
        let root: Value = serde_json::from_slice(&bytes).unwrap();
        let stop = root["hooks"]["Stop"].as_array().unwrap();
        assert_eq!(stop.len(), 1, "{root}");
        assert_eq!(
            stop[0]["hooks"][0]["command"],
            "/x/wakebridge hook --agent codex"
        );
        let session_start = &root["hooks"]["SessionStart"][0]["hooks"][0]["command"];
        assert_eq!(session_start, "/x/wakebridge hook --agent codex");
        let again = install(Some(&bytes), "/x/wakebridge", &WIRING, false).unwrap();
        assert_eq!(again, Install::Unchanged);
    }

    #[test]
    fn only_our_command_is_approved_at_its_own_place() {
        let theirs = json!({"hooks": [{"type": "command", "command": "notify-me", "timeout": 5}]});
        let ours = json!({"hooks": [{"type": "command", "command": COMMAND, "timeout": 10}]});
        let bytes = file(json!({"Stop": [theirs, ours], "Elsewhere": [ours]}));
        let found = approvals(Path::new("/c/hooks.json"), &bytes, COMMAND);
        let keys: Vec<&str> = found.iter().map(|a| a.key.as_str()).collect();
        assert_eq!(keys, ["/c/hooks.json:stop:1:0"]);
        assert!(approvals(Path::new("/c/hooks.json"), b"not json", COMMAND).is_empty());
    }

    fn approval(n: u8) -> Approval {
        Approval {
            key: format!("/c/hooks.json:stop:{n}:0"),
            hash: format!("sha256:{n}"),
        }
    }

    #[test]
    fn trust_keeps_the_file_and_distrust_takes_back_only_its_own() {
        let mine =
            "# mine\nmodel = \"o9\" # kept\n\n[projects.\"/w\"]\ntrust_level = \"trusted\"\n";
        let trusted = trust(Some(mine.as_bytes()), &[approval(0), approval(1)])
            .unwrap()
            .unwrap();
        let text = String::from_utf8(trusted.clone()).unwrap();
        assert!(text.starts_with(mine), "{text}");
        assert!(
            text.contains(
                "[hooks.state.\"/c/hooks.json:stop:0:0\"]\ntrusted_hash = \"sha256:0\"\n"
            ),
            "{text}"
        );
        assert!(
            !text.contains("[hooks]\n") && !text.contains("[hooks.state]\n"),
            "{text}"
        );
        assert_eq!(
            trust(Some(&trusted), &[approval(1)]).unwrap(),
            None,
            "there already"
        );
        // The user trusted another hook, and Codex re-approved the second one changed.
        let mut edited = text.replace("sha256:1", "sha256:theirs");
        edited.push_str("\n[hooks.state.\"/c/hooks.json:stop:7:0\"]\ntrusted_hash = \"x\"\n");
        let back = distrust(edited.as_bytes(), &[approval(0), approval(1)])
            .unwrap()
            .unwrap();
        let back = String::from_utf8(back).unwrap();
        assert!(!back.contains("sha256:0\""), "{back}");
        assert!(
            back.contains("sha256:theirs") && back.contains("stop:7:0"),
            "{back}"
        );
        let only = distrust(&trusted, &[approval(0), approval(1)])
            .unwrap()
            .unwrap();
        assert_eq!(String::from_utf8(only).unwrap(), mine);
        assert_eq!(distrust(mine.as_bytes(), &[approval(0)]).unwrap(), None);
        let both = [approval(0), approval(1)];
        assert_eq!(approved(&trusted, &both), 2);
        assert_eq!(approved(edited.as_bytes(), &both), 1, "one changed since");
        assert_eq!(approved(b"not = [toml", &both), 0);
    }

    #[test]
    fn a_file_codex_could_not_read_is_refused() {
        assert!(matches!(
            trust(Some(b"= nope"), &[approval(0)]),
            Err(TrustError::NotToml(_))
        ));
        assert!(matches!(
            trust(Some(b"hooks = 3"), &[approval(0)]),
            Err(TrustError::NotTable)
        ));
        let none = trust(None, &[approval(0)]).unwrap().unwrap();
        assert_eq!(
            String::from_utf8(none).unwrap(),
            "[hooks.state.\"/c/hooks.json:stop:0:0\"]\ntrusted_hash = \"sha256:0\"\n"
        );
    }
}
