//! `doctor`'s Codex CLI line, for a machine where Codex is set up (its home exists): are
//! wakebridge's hooks wired in its hooks.json, and approved in its config.toml, without which
//! Codex runs none of them.

use super::Check;
use crate::claude::settings;
use crate::codex::home::CodexHome;
use crate::codex::hooks::{self, WIRED_EVENTS, WIRING};
use crate::env::Env;

const INSTALL: &str = "wakebridge codex install --trust-hooks";

/// `None`: no Codex here.
pub fn codex_check(env: &Env) -> Option<Check> {
    let home = CodexHome::locate(env)
        .ok()
        .filter(|home| home.dir.is_dir())?;
    let file = home.hooks_file();
    let name = file.display();
    let bytes = match std::fs::read(&file) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Some(Check::warn(
                "codex",
                format!("{name} does not exist"),
                INSTALL,
            ));
        }
        Err(e) => {
            return Some(Check::warn(
                "codex",
                format!("cannot read {name}: {e}"),
                INSTALL,
            ));
        }
    };
    let wired = match settings::wired(&bytes) {
        Ok(wired) => wired,
        Err(e) => return Some(Check::warn("codex", format!("{name}: {e}"), INSTALL)),
    };
    let missing: Vec<&str> = (WIRED_EVENTS.iter())
        .map(|(event, _)| *event)
        .filter(|event| !wired.hooks.contains_key(*event))
        .collect();
    let program = wired.hooks.get("Stop").filter(|_| missing.is_empty());
    let Some(program) = program else {
        let missing = missing.join(", ");
        return Some(Check::warn(
            "codex",
            format!("{missing} not wired in {name}"),
            INSTALL,
        ));
    };
    let command = settings::hook_command(program, &WIRING).ok()?;
    let approvals = hooks::approvals(&file, &bytes, &command);
    if approvals.is_empty() {
        let found = format!("wakebridge's hooks in {name} do not name their agent (--agent codex)");
        return Some(Check::warn("codex", found, INSTALL));
    }
    let config = std::fs::read(home.config_file()).unwrap_or_default();
    let approved = hooks::approved(&config, &approvals);
    if approved < approvals.len() {
        let found = format!(
            "wired in {name}, {approved} of {} approved: Codex runs none until a person \
             approves them (\"Hooks need review\" at its next start)",
            approvals.len()
        );
        return Some(Check::warn("codex", found, INSTALL));
    }
    Some(Check::ok("codex", format!("wired in {name} and approved")))
}
