//! Claude Code's `settings.json` as `wakebridge claude install` and `uninstall` edit it, bytes
//! in and bytes out. Install appends wakebridge's hooks after the user's, updates an older
//! binary's path in place, and sets the status line or wraps the user's (`<exe> statusline
//! --wrap '<theirs>'`, so the file says what uninstall puts back), and on request sets
//! `crossSessionInbound` to `accept`; uninstall removes exactly those. An undocumented shape is
//! refused, not guessed at; key order and numbers survive.

use serde_json::{Map, Value, json};

use crate::wire::json_kind;

use super::hooks::{WIRED_EVENTS, hook_group};

pub const SETTINGS_FILE: &str = "settings.json";
/// The file name wakebridge's binary has; any path to it running `hook` or `statusline` is ours.
pub const BINARY_NAME: &str = "wakebridge";
/// The `padding` of wakebridge's own status line: flush left like Claude Code's footer.
pub const STATUSLINE_PADDING: u64 = 0;
/// Its `refreshInterval` (seconds): the idle/busy word and a limit's countdown move on their own.
pub const STATUSLINE_REFRESH_SECS: u64 = 30;
/// The `statusline` flag that carries the user's own command.
pub const WRAP_FLAG: &str = "--wrap";
/// Who may put a message into a session's inbox: `accept`, `hold` (a human answers each) or
/// `refuse`. Unset, a session in bypass mode holds them.
pub const INBOUND_KEY: &str = "crossSessionInbound";
pub const INBOUND_ACCEPT: &str = "accept";

/// Why a settings file cannot be rewritten safely; the caller names the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    #[error(
        "it is not plain JSON ({message} at line {line}, column {column}); Claude Code reads it \
         as strict JSON, so remove comments and trailing commas (or fix the syntax) and run this \
         again"
    )]
    NotJson {
        message: String,
        line: usize,
        column: usize,
    },
    #[error("its top level is {found}, not an object; make it an object ({{}} at the least)")]
    RootNotObject { found: &'static str },
    #[error("\"hooks\" is {found}, not an object of event names; fix or remove it")]
    HooksNotObject { found: &'static str },
    #[error("\"hooks\".\"{event}\" is {found}, not an array of matcher groups; fix or remove it")]
    EventNotArray { event: String, found: &'static str },
    #[error(
        "\"hooks\".\"{event}\"[{index}] is not an object with a \"hooks\" array ({detail}); fix \
         or remove that entry"
    )]
    GroupShape {
        event: String,
        index: usize,
        detail: String,
    },
    #[error(
        "\"statusLine\" is {found}; wakebridge only knows an object with \"type\": \"command\" \
         and a string \"command\", so set it that way or remove it"
    )]
    StatusLineShape { found: String },
    #[error(
        "the path of this wakebridge binary ({exe:?}) cannot be written as a shell word; run a \
         copy installed at a plain path"
    )]
    UnquotableExe { exe: String },
}

/// What install did to the settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Install {
    Unchanged,
    Changed {
        bytes: Vec<u8>,
        created: Created,
        /// The file already had something of wakebridge's (an older install).
        had_ours: bool,
    },
}

/// The keys install created (as opposed to added to), so uninstall removes them only then.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Created {
    pub hooks: bool,
    /// Event keys under `hooks`.
    pub events: Vec<String>,
    /// Set when install made `crossSessionInbound` `accept`, so uninstall puts back what it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted: Option<Accepted>,
}

/// What `crossSessionInbound` was before install made it `accept`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Accepted {
    /// `None`: it was unset.
    #[serde(default)]
    pub previous: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Uninstall {
    NothingOurs,
    Changed(Vec<u8>),
}

/// What install wires into an agent's hooks file, all in Claude Code's shape (`{"hooks":
/// {"Stop": [{"matcher": ..., "hooks": [{"type": "command", ...}]}]}}`), which Codex CLI reads
/// too.
#[derive(Debug, Clone, Copy)]
pub struct Wiring {
    /// `(event, matcher)` pairs; `None`: the agent's file has no matcher for that event.
    pub events: &'static [(&'static str, Option<&'static str>)],
    /// What the hook command says after `hook` (` --agent codex`), with its leading blank.
    pub hook_args: &'static str,
    /// Whether the file takes wakebridge's status line.
    pub statusline: bool,
}

/// What Claude Code's settings.json is wired with: every event wakebridge hears, and the status
/// line.
pub const WIRING: Wiring = Wiring {
    events: &WIRED_EVENTS,
    hook_args: "",
    statusline: true,
};

/// Merges wakebridge (the binary at `exe`, an absolute path) into the settings `current` as
/// `wiring` says, and with `accept` makes `crossSessionInbound` `accept` (else that key is never
/// touched).
pub fn install(
    current: Option<&[u8]>,
    exe: &str,
    wiring: &Wiring,
    accept: bool,
) -> Result<Install, SettingsError> {
    let before = parse(current)?;
    let ours = Ours::new(exe)?;
    let had_ours = {
        let wired = wired_in(before.clone(), &ours);
        !wired.hooks.is_empty() || wired.statusline
    };
    let mut root = before.clone();
    let mut created = Created::default();
    if !root.contains_key("hooks") {
        root.insert("hooks".into(), Value::Object(Map::new()));
        created.hooks = true;
    }
    let hooks = hooks_mut(&mut root)?;
    // Older entries first: wherever one is, its binary becomes this one.
    for groups in hooks.values_mut() {
        for entry in entries_mut(groups) {
            if let Some(updated) = ours.updated(entry, Kind::Hook) {
                entry.insert("command".into(), Value::String(updated));
            }
        }
    }
    // An entry of ours without the wiring's arguments (a snippet pasted by hand) would run as
    // another agent's hook: they are added.
    let args = wiring.hook_args;
    for entry in hooks.values_mut().flat_map(entries_mut) {
        let ours = ours.recognise(entry, Kind::Hook).is_some();
        if ours && !args.is_empty() && !command_of(entry).contains(args.trim()) {
            let command = format!("{}{args}", command_of(entry));
            entry.insert("command".into(), Value::String(command));
        }
    }
    let command = hook_command(exe, wiring)?;
    for (event, matcher) in wiring.events {
        let groups = hooks.entry(*event).or_insert_with(|| {
            created.events.push((*event).to_owned());
            Value::Array(Vec::new())
        });
        let present = entries_mut(groups).any(|entry| ours.recognise(entry, Kind::Hook).is_some());
        if !present && let Value::Array(list) = groups {
            list.push(hook_group(*matcher, &command));
        }
    }
    match root.get_mut("statusLine") {
        _ if !wiring.statusline => {}
        None => {
            root.insert(
                "statusLine".into(),
                json!({
                    "type": "command",
                    "command": ours.command(Kind::Statusline, None),
                    "padding": STATUSLINE_PADDING,
                    "refreshInterval": STATUSLINE_REFRESH_SECS,
                }),
            );
        }
        Some(line) => {
            let line = statusline_mut(line)?;
            let command = match ours.recognise(line, Kind::Statusline) {
                Some(_) => ours.updated(line, Kind::Statusline),
                None => Some(ours.command(Kind::Statusline, Some(command_of(line)))),
            };
            if let Some(command) = command {
                line.insert("command".into(), Value::String(command));
            }
        }
    }
    let accept_value = Value::String(INBOUND_ACCEPT.into());
    if accept && root.get(INBOUND_KEY) != Some(&accept_value) {
        let previous = root.insert(INBOUND_KEY.into(), accept_value);
        created.accepted = Some(Accepted { previous });
    }
    if root == before {
        return Ok(Install::Unchanged);
    }
    Ok(Install::Changed {
        bytes: render(&root),
        created,
        had_ours,
    })
}

/// The command install writes for each hook: the binary at `exe`, quoted, running `hook` with
/// what `wiring` adds.
pub fn hook_command(exe: &str, wiring: &Wiring) -> Result<String, SettingsError> {
    Ok(Ours::new(exe)?.command(Kind::Hook, None) + wiring.hook_args)
}

/// Takes any wakebridge's hooks out of `current` (and the keys `created` names once empty), its
/// status line (the wrapped command put back, or the key removed), and an `accept` install set
/// (what was there put back; a value the user set since is theirs).
pub fn uninstall(current: &[u8], exe: &str, created: &Created) -> Result<Uninstall, SettingsError> {
    let before = parse(Some(current))?;
    let ours = Ours::new(exe)?;
    let mut root = before.clone();
    let accepted = root.get(INBOUND_KEY).and_then(Value::as_str) == Some(INBOUND_ACCEPT);
    if let Some(Accepted { previous }) = created.accepted.as_ref().filter(|_| accepted) {
        match previous {
            Some(previous) => root.insert(INBOUND_KEY.into(), previous.clone()),
            None => root.shift_remove(INBOUND_KEY),
        };
    }
    if let Some(line) = root.get_mut("statusLine") {
        let line = statusline_mut(line)?;
        match ours.recognise(line, Kind::Statusline) {
            Some(Some(theirs)) => {
                line.insert("command".into(), Value::String(theirs));
            }
            Some(None) => {
                root.shift_remove("statusLine");
            }
            None => {}
        }
    }
    if root.contains_key("hooks") {
        let hooks = hooks_mut(&mut root)?;
        hooks.retain(|event, groups| {
            let Value::Array(list) = groups else {
                return true;
            };
            let mut removed_any = false;
            list.retain_mut(|group| {
                let Some(Value::Array(entries)) = group.get_mut("hooks") else {
                    return true;
                };
                let had = entries.len();
                entries.retain(|entry| {
                    entry
                        .as_object()
                        .is_none_or(|entry| ours.recognise(entry, Kind::Hook).is_none())
                });
                let removed = entries.len() < had;
                removed_any |= removed;
                // A group that held only ours goes with it; one the user left empty stays.
                !(removed && entries.is_empty())
            });
            !(removed_any && list.is_empty() && created.events.iter().any(|e| e == event))
        });
        if hooks.is_empty() && created.hooks {
            root.shift_remove("hooks");
        }
    }
    if root == before {
        return Ok(Uninstall::NothingOurs);
    }
    Ok(Uninstall::Changed(render(&root)))
}

/// What a settings file wires to any wakebridge binary, for `doctor`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wired {
    /// Event name → the program its wakebridge hook runs (as written, unquoted).
    pub hooks: std::collections::BTreeMap<String, String>,
    pub statusline: bool,
    /// `crossSessionInbound` as written (`None`: unset).
    pub inbound: Option<Value>,
}

pub fn wired(current: &[u8]) -> Result<Wired, SettingsError> {
    Ok(wired_in(parse(Some(current))?, &Ours::new(BINARY_NAME)?))
}

/// What `root` wires to the binary `ours` recognises.
fn wired_in(mut root: Map<String, Value>, ours: &Ours) -> Wired {
    let line = root.get("statusLine").and_then(Value::as_object);
    let statusline = line.is_some_and(|line| ours.recognise(line, Kind::Statusline).is_some());
    let mut hooks = std::collections::BTreeMap::new();
    if let Some(events) = root.get_mut("hooks").and_then(Value::as_object_mut) {
        for (event, groups) in events.iter_mut() {
            let program = entries_mut(groups)
                .filter(|entry| ours.recognise(entry, Kind::Hook).is_some())
                .find_map(|entry| shlex::split(command_of(entry))?.into_iter().next());
            if let Some(program) = program {
                hooks.insert(event.clone(), program);
            }
        }
    }
    Wired {
        hooks,
        statusline,
        inbound: root.get(INBOUND_KEY).cloned(),
    }
}

/// The file's object, checked down to every shape install and uninstall walk.
fn parse(current: Option<&[u8]>) -> Result<Map<String, Value>, SettingsError> {
    let blank = current.is_none_or(|bytes| bytes.iter().all(u8::is_ascii_whitespace));
    if blank {
        return Ok(Map::new());
    }
    let value: Value = serde_json::from_slice(current.unwrap_or_default()).map_err(|e| {
        SettingsError::NotJson {
            message: without_position(&e),
            line: e.line(),
            column: e.column(),
        }
    })?;
    let Value::Object(mut root) = value else {
        return Err(SettingsError::RootNotObject {
            found: json_kind(&value),
        });
    };
    if root.contains_key("hooks") {
        for (event, groups) in hooks_mut(&mut root)?.iter() {
            check_groups(event, groups)?;
        }
    }
    if let Some(line) = root.get_mut("statusLine") {
        statusline_mut(line)?;
    }
    Ok(root)
}

/// serde_json's message without its own " at line L column C" (the error says it once).
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

fn check_groups(event: &str, groups: &Value) -> Result<(), SettingsError> {
    let Value::Array(list) = groups else {
        return Err(SettingsError::EventNotArray {
            event: event.to_owned(),
            found: json_kind(groups),
        });
    };
    for (index, group) in list.iter().enumerate() {
        let shape = |detail: String| SettingsError::GroupShape {
            event: event.to_owned(),
            index,
            detail,
        };
        let Value::Object(group) = group else {
            return Err(shape(format!("it is {}", json_kind(group))));
        };
        let Some(Value::Array(entries)) = group.get("hooks") else {
            let found = group.get("hooks").map_or("missing", json_kind);
            return Err(shape(format!("its \"hooks\" is {found}")));
        };
        if let Some((at, entry)) = entries.iter().enumerate().find(|(_, e)| !e.is_object()) {
            return Err(shape(format!(
                "its \"hooks\"[{at}] is {}, not an object",
                json_kind(entry)
            )));
        }
    }
    Ok(())
}

fn hooks_mut(root: &mut Map<String, Value>) -> Result<&mut Map<String, Value>, SettingsError> {
    match root.get_mut("hooks") {
        Some(Value::Object(hooks)) => Ok(hooks),
        Some(other) => Err(SettingsError::HooksNotObject {
            found: json_kind(other),
        }),
        // Callers check the key first; an absent one reads as not an object all the same.
        None => Err(SettingsError::HooksNotObject { found: "missing" }),
    }
}

fn statusline_mut(line: &mut Value) -> Result<&mut Map<String, Value>, SettingsError> {
    let shape = |found: String| Err(SettingsError::StatusLineShape { found });
    let Value::Object(map) = line else {
        return shape(json_kind(line).to_owned());
    };
    match (map.get("type"), map.get("command")) {
        (Some(Value::String(kind)), Some(Value::String(_))) if kind == "command" => Ok(map),
        (Some(Value::String(kind)), _) if kind != "command" => shape(format!("of type {kind:?}")),
        (_, Some(Value::String(_))) => shape("an object without \"type\": \"command\"".into()),
        _ => shape("an object without a string \"command\"".into()),
    }
}

/// The entries of every matcher group in an event's list (shapes already checked).
fn entries_mut(groups: &mut Value) -> impl Iterator<Item = &mut Map<String, Value>> {
    groups
        .as_array_mut()
        .into_iter()
        .flatten()
        .filter_map(|group| group.get_mut("hooks").and_then(Value::as_array_mut))
        .flatten()
        .filter_map(Value::as_object_mut)
}

fn command_of(entry: &Map<String, Value>) -> &str {
    entry.get("command").and_then(Value::as_str).unwrap_or("")
}

/// The text Claude Code itself writes: 2-space indentation and a trailing newline.
fn render(root: &Map<String, Value>) -> Vec<u8> {
    let text = serde_json::to_string_pretty(root).unwrap_or_else(|_| "{}".into());
    format!("{text}\n").into_bytes()
}

/// Which of wakebridge's commands an entry runs (its verb, lower-cased).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::AsRefStr)]
#[strum(serialize_all = "lowercase")]
enum Kind {
    Hook,
    Statusline,
}

/// This binary, and how to tell any wakebridge's commands.
struct Ours {
    exe: String,
    quoted: String,
}

impl Ours {
    fn new(exe: &str) -> Result<Ours, SettingsError> {
        let quoted = shlex::try_quote(exe)
            .map_err(|_| SettingsError::UnquotableExe {
                exe: exe.to_owned(),
            })?
            .into_owned();
        Ok(Ours {
            exe: exe.to_owned(),
            quoted,
        })
    }

    /// This binary running `kind`'s verb; a status line wraps the user's command `wrap`.
    fn command(&self, kind: Kind, wrap: Option<&str>) -> String {
        let plain = format!("{} {}", self.quoted, kind.as_ref());
        match wrap {
            // A string never holds a NUL (serde_json refuses one unescaped, and `\u0000` is
            // refused by shlex); the fallback keeps the user's line visible without ours.
            Some(theirs) => match shlex::try_quote(theirs) {
                Ok(quoted) => format!("{plain} {WRAP_FLAG} {quoted}"),
                Err(_) => theirs.to_owned(),
            },
            None => plain,
        }
    }

    /// Whether `entry`'s command is a wakebridge binary (this one, or any file named
    /// `wakebridge`) running `kind`'s verb, and the user's command a status line wraps.
    fn recognise(&self, entry: &Map<String, Value>, kind: Kind) -> Option<Option<String>> {
        let words = shlex::split(command_of(entry))?;
        let (program, rest) = words.split_first()?;
        let named = std::path::Path::new(program)
            .file_name()
            .is_some_and(|name| name == BINARY_NAME);
        if !(named || *program == self.exe) || rest.first()? != kind.as_ref() {
            return None;
        }
        let wrap_prefix = format!("{WRAP_FLAG}=");
        let wrapped = rest.iter().enumerate().find_map(|(at, word)| {
            if word == WRAP_FLAG {
                rest.get(at + 1).cloned()
            } else {
                word.strip_prefix(&wrap_prefix).map(str::to_owned)
            }
        });
        Some(wrapped.filter(|_| kind == Kind::Statusline))
    }

    /// The command of a wakebridge `entry` with its binary made this one and the rest of the
    /// text kept as written (`$HOME` in an argument still expands), or `None` when it already
    /// is this one or is not ours.
    fn updated(&self, entry: &Map<String, Value>, kind: Kind) -> Option<String> {
        self.recognise(entry, kind)?;
        let command = command_of(entry);
        let text = command.trim_start();
        // The first word's extent: the shortest prefix ending at a blank that splits to it.
        let first = shlex::split(text)?.into_iter().next()?;
        if first == self.exe {
            return None;
        }
        let end = text
            .char_indices()
            .filter(|(_, c)| c.is_whitespace())
            .map(|(at, _)| at)
            .chain([text.len()])
            .find(|&at| shlex::split(&text[..at]).is_some_and(|w| w == [first.clone()]))?;
        Some(format!("{}{}", self.quoted, &text[end..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXE: &str = "/opt/wb/bin/wakebridge";

    fn installed(current: &str) -> (String, Created, bool) {
        match install(Some(current.as_bytes()), EXE, &WIRING, false).unwrap() {
            Install::Changed {
                bytes,
                created,
                had_ours,
            } => (String::from_utf8(bytes).unwrap(), created, had_ours),
            Install::Unchanged => panic!("nothing changed"),
        }
    }

    fn value(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    fn uninstalled(current: &str, created: &Created) -> String {
        match uninstall(current.as_bytes(), EXE, created).unwrap() {
            Uninstall::Changed(bytes) => String::from_utf8(bytes).unwrap(),
            Uninstall::NothingOurs => panic!("nothing of ours found"),
        }
    }

    #[test]
    fn no_settings_get_every_wired_event_and_our_status_line() {
        for current in [None, Some(&b""[..]), Some(&b" \n"[..]), Some(&b"{}"[..])] {
            let Install::Changed {
                bytes,
                created,
                had_ours,
            } = install(current, EXE, &WIRING, false).unwrap()
            else {
                panic!("unchanged");
            };
            assert!(!had_ours);
            assert!(created.hooks);
            let names: Vec<&str> = WIRED_EVENTS.iter().map(|(e, _)| *e).collect();
            assert_eq!(created.events, names);
            let text = String::from_utf8(bytes).unwrap();
            assert!(text.ends_with("}\n") && text.contains("\n  \"hooks\": {\n    \""));
            let v = value(&text);
            for (event, matcher) in WIRED_EVENTS {
                assert_eq!(v["hooks"][event][0]["matcher"], matcher.unwrap());
                assert_eq!(
                    v["hooks"][event][0]["hooks"][0]["command"],
                    format!("{EXE} hook")
                );
                assert_eq!(v["hooks"][event][0]["hooks"][0]["timeout"], 10);
            }
            assert_eq!(
                v["statusLine"],
                json!({"type": "command", "command": format!("{EXE} statusline"), "padding": 0, "refreshInterval": 30})
            );
        }
    }

    #[test]
    fn the_users_entries_and_keys_stay_where_they_are() {
        let mine = r#"{"model": "opus", "hooks": {"Stop": [{"matcher": "", "hooks": [{"type": "command", "command": "say done"}]}], "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh", "timeout": 1.50}]}], "PostToolUse": []}, "env": {"BIG": 12345678901234567890}}"#;
        let (text, created, had_ours) = installed(mine);
        assert!(!had_ours && !created.hooks);
        assert!(!created.events.contains(&"Stop".to_owned()));
        assert!(created.events.contains(&"SessionStart".to_owned()));
        let v = value(&text);
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["model", "hooks", "env", "statusLine"]);
        let events: Vec<&String> = v["hooks"].as_object().unwrap().keys().collect();
        assert_eq!(&events[..3], ["Stop", "PreToolUse", "PostToolUse"]);
        assert_eq!(v["hooks"]["Stop"][0]["hooks"][0]["command"], "say done");
        assert_eq!(
            v["hooks"]["Stop"][1]["hooks"][0]["command"],
            format!("{EXE} hook")
        );
        assert_eq!(v["hooks"]["PreToolUse"][0]["matcher"], "Bash");
        assert_eq!(v["hooks"]["PostToolUse"], json!([]));
        // Numbers as written, digits and all.
        assert!(text.contains("12345678901234567890") && text.contains("1.50"));
    }

    #[test]
    fn a_second_install_changes_nothing() {
        let (text, _, _) = installed("{}");
        assert_eq!(
            install(Some(text.as_bytes()), EXE, &WIRING, false).unwrap(),
            Install::Unchanged
        );
        // Odd formatting is left alone when there is nothing to add.
        let compact = value(&text).to_string();
        assert_eq!(
            install(Some(compact.as_bytes()), EXE, &WIRING, false).unwrap(),
            Install::Unchanged
        );
    }

    #[test]
    fn an_older_wakebridge_is_updated_in_place_not_duplicated() {
        let old = r#"{"hooks": {"Stop": [{"matcher": "", "hooks": [{"type": "command", "command": "say hi"}, {"type": "command", "command": "wakebridge hook", "timeout": 10}]}]}, "statusLine": {"type": "command", "command": "wakebridge statusline --wake-dir \"$HOME/w\"", "padding": 2}}"#;
        let (text, _, had_ours) = installed(old);
        assert!(had_ours);
        let v = value(&text);
        assert_eq!(v["hooks"]["Stop"].as_array().unwrap().len(), 1);
        assert_eq!(
            v["hooks"]["Stop"][0]["hooks"][1]["command"],
            format!("{EXE} hook")
        );
        assert_eq!(
            v["statusLine"]["command"],
            format!("{EXE} statusline --wake-dir \"$HOME/w\"")
        );
        assert_eq!(v["statusLine"]["padding"], 2);
        let moved = text.replace(EXE, "'/old place/wakebridge'");
        let (again, _, _) = installed(&moved);
        assert_eq!(again, text);
    }

    #[test]
    fn a_path_with_spaces_is_quoted_and_still_recognised() {
        let exe = "/Users/a b/bin/wakebridge";
        let Install::Changed { bytes, .. } = install(None, exe, &WIRING, false).unwrap() else {
            panic!("unchanged");
        };
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            v["hooks"]["Stop"][0]["hooks"][0]["command"],
            "'/Users/a b/bin/wakebridge' hook"
        );
        assert_eq!(
            install(Some(&bytes), exe, &WIRING, false).unwrap(),
            Install::Unchanged
        );
    }

    #[test]
    fn a_foreign_status_line_is_wrapped_with_its_other_keys_kept() {
        let mine = r#"{"statusLine": {"type": "command", "command": "npx -y ccstatusline@latest | sed 's/x/y/'", "padding": 1, "refreshInterval": 5}}"#;
        let (text, created, _) = installed(mine);
        let v = value(&text);
        let command = v["statusLine"]["command"].as_str().unwrap();
        let words = shlex::split(command).unwrap();
        assert_eq!(
            words,
            [
                EXE,
                "statusline",
                "--wrap",
                "npx -y ccstatusline@latest | sed 's/x/y/'"
            ]
        );
        assert_eq!(v["statusLine"]["padding"], 1);
        assert_eq!(v["statusLine"]["refreshInterval"], 5);
        assert_eq!(
            install(Some(text.as_bytes()), EXE, &WIRING, false).unwrap(),
            Install::Unchanged
        );
        // Uninstall puts the user's command back as it was.
        let back = uninstalled(&text, &created);
        assert_eq!(value(&back), value(mine));
    }

    #[test]
    fn uninstall_takes_out_only_ours() {
        let mine = r#"{"hooks": {"Stop": [{"matcher": "", "hooks": [{"type": "command", "command": "say done"}]}], "Notification": [{"matcher": "", "hooks": []}]}}"#;
        let (text, created, _) = installed(mine);
        let back = uninstalled(&text, &created);
        assert_eq!(value(&back), value(mine), "{back}");
        // Nothing of ours left: said so.
        assert_eq!(
            uninstall(back.as_bytes(), EXE, &created).unwrap(),
            Uninstall::NothingOurs
        );
    }

    #[test]
    fn uninstall_keeps_keys_it_did_not_create_and_a_users_edit() {
        let (text, created, _) = installed("{}");
        let mut v = value(&text);
        v["model"] = json!("sonnet");
        v["hooks"]["Stop"]
            .as_array_mut()
            .unwrap()
            .push(json!({"matcher": "", "hooks": [{"type": "command", "command": "say bye"}]}));
        let back = uninstalled(&serde_json::to_string_pretty(&v).unwrap(), &created);
        assert_eq!(
            value(&back),
            json!({"hooks": {"Stop": [{"matcher": "", "hooks": [{"type": "command", "command": "say bye"}]}]}, "model": "sonnet"})
        );
        // Without the record of what it created, empty keys stay.
        let kept = uninstalled(&text, &Created::default());
        let empty: Map<String, Value> = WIRED_EVENTS
            .iter()
            .map(|(e, _)| ((*e).to_owned(), json!([])))
            .collect();
        assert_eq!(value(&kept), json!({"hooks": empty}));
        // With it, nothing at all.
        assert_eq!(value(&uninstalled(&text, &created)), json!({}));
    }

    #[test]
    fn accepting_session_messages_sets_the_key_and_uninstall_puts_back_what_was_there() {
        let set_where_it_was = ["crossSessionInbound", "model", "hooks", "statusLine"];
        for (mine, order) in [
            (
                r#"{"model": "opus"}"#,
                ["model", "hooks", "statusLine", INBOUND_KEY],
            ),
            (
                r#"{"crossSessionInbound": "hold", "model": "opus"}"#,
                set_where_it_was,
            ),
        ] {
            let Install::Changed { bytes, created, .. } =
                install(Some(mine.as_bytes()), EXE, &WIRING, true).unwrap()
            else {
                panic!("unchanged");
            };
            let text = String::from_utf8(bytes).unwrap();
            let v = value(&text);
            assert_eq!(v[INBOUND_KEY], "accept");
            let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
            assert_eq!(keys, order);
            let previous = value(mine).get(INBOUND_KEY).cloned();
            assert_eq!(created.accepted, Some(Accepted { previous }));
            assert_eq!(value(&uninstalled(&text, &created)), value(mine));
        }
    }

    #[test]
    fn without_the_flag_the_inbound_key_is_never_touched() {
        let mine = r#"{"crossSessionInbound": "hold"}"#;
        let (text, created, _) = installed(mine);
        assert_eq!(value(&text)[INBOUND_KEY], "hold");
        assert_eq!(created.accepted, None);
        // Already `accept` (the user's own choice): nothing to record, and uninstall keeps it.
        let theirs = r#"{"crossSessionInbound": "accept"}"#;
        let Install::Changed { bytes, created, .. } =
            install(Some(theirs.as_bytes()), EXE, &WIRING, true).unwrap()
        else {
            panic!("unchanged");
        };
        assert_eq!(created.accepted, None);
        let back = uninstalled(&String::from_utf8(bytes).unwrap(), &created);
        assert_eq!(value(&back), value(theirs));
    }

    #[test]
    fn a_value_the_user_set_after_install_is_theirs() {
        let Install::Changed { bytes, created, .. } = install(None, EXE, &WIRING, true).unwrap()
        else {
            panic!("unchanged");
        };
        let mut v: Value = serde_json::from_slice(&bytes).unwrap();
        v[INBOUND_KEY] = json!("refuse");
        let back = uninstalled(&v.to_string(), &created);
        assert_eq!(value(&back), json!({"crossSessionInbound": "refuse"}));
        // The record round-trips an unset previous value as unset.
        let record = serde_json::to_string(&created).unwrap();
        let read: Created = serde_json::from_str(&record).unwrap();
        assert_eq!(read.accepted, Some(Accepted { previous: None }));
        // And an older record without the field reads as nothing accepted.
        let old: Created = serde_json::from_str(r#"{"hooks": true, "events": []}"#).unwrap();
        assert_eq!(old.accepted, None);
    }

    #[test]
    fn nothing_ours_is_nothing_to_do() {
        assert_eq!(
            uninstall(br#"{"hooks": {"Stop": []}}"#, EXE, &Created::default()).unwrap(),
            Uninstall::NothingOurs
        );
        let has_anything_ours = |current: &[u8], exe| {
            let wired = wired_in(parse(Some(current)).unwrap(), &Ours::new(exe).unwrap());
            !wired.hooks.is_empty() || wired.statusline
        };
        assert!(!has_anything_ours(b"{}", EXE));
        assert!(has_anything_ours(
            br#"{"statusLine": {"type": "command", "command": "wakebridge statusline"}}"#,
            EXE
        ));
        // A command that only mentions wakebridge is not ours.
        let tee = r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "tee -a log | wakebridge hook"}]}]}}"#;
        assert!(!has_anything_ours(tee.as_bytes(), EXE));
    }

    #[test]
    fn shapes_we_do_not_know_are_refused() {
        let refused = |text: &str| install(Some(text.as_bytes()), EXE, &WIRING, false).unwrap_err();
        let e = refused("{\n  // mine\n  \"a\": 1\n}");
        assert!(matches!(e, SettingsError::NotJson { line: 2, .. }), "{e:?}");
        assert!(e.to_string().contains("comments"), "{e}");
        assert!(matches!(
            refused(r#"{"a": 1,}"#),
            SettingsError::NotJson { line: 1, .. }
        ));
        assert_eq!(
            refused("[]"),
            SettingsError::RootNotObject { found: "an array" }
        );
        assert_eq!(
            refused(r#"{"hooks": []}"#),
            SettingsError::HooksNotObject { found: "an array" }
        );
        assert_eq!(
            refused(r#"{"hooks": {"Stop": {}}}"#),
            SettingsError::EventNotArray {
                event: "Stop".into(),
                found: "an object"
            }
        );
        assert!(matches!(
            refused(r#"{"hooks": {"Stop": [{"matcher": ""}]}}"#),
            SettingsError::GroupShape { index: 0, .. }
        ));
        assert!(matches!(
            refused(r#"{"hooks": {"Stop": [{"hooks": ["x"]}]}}"#),
            SettingsError::GroupShape { .. }
        ));
        for line in [
            r#""echo hi""#,
            r#"{"type": "static", "text": "x"}"#,
            r#"{"type": "command"}"#,
            r#"{"command": "x"}"#,
        ] {
            let text = format!(r#"{{"statusLine": {line}}}"#);
            assert!(
                matches!(refused(&text), SettingsError::StatusLineShape { .. }),
                "{line}"
            );
            assert!(uninstall(text.as_bytes(), EXE, &Created::default()).is_err());
        }
    }
}
