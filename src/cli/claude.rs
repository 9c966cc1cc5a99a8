//! `wakebridge claude install|uninstall`: `claude::settings`'s (pure) edit of Claude Code's
//! settings.json through the file work every agent's install shares (`cli::edit`), and what
//! install says about who may message the sessions. Exit codes: 0 done, 1 refused or an I/O
//! error, 2 no Claude Code config dir.

use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::edit::{self, EditError};
use crate::claude::home::ClaudeHome;
use crate::claude::settings::{self, SETTINGS_FILE};
use crate::env::Env;

#[derive(Debug, Clone, Subcommand)]
pub enum ClaudeCommand {
    /// Merge wakebridge's hooks and status line into Claude Code's settings.json (a backup is
    /// written first and the change printed as a diff); an existing status line is kept, wrapped
    Install(InstallArgs),
    /// Take out exactly what install added: the previous file back as it was when it is
    /// untouched since, else only wakebridge's entries (and the wrapped status line restored)
    Uninstall(EditArgs),
}

#[derive(Debug, Clone, Args)]
pub struct EditArgs {
    /// Print the diff only; write nothing
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Clone, Args)]
pub struct InstallArgs {
    #[command(flatten)]
    pub edit: EditArgs,
    /// Also set "crossSessionInbound": "accept", so sessions in bypass mode take wakebridge's
    /// messages without a human; any process of yours (and your other Claude sessions) can then
    /// message your sessions too
    #[arg(long)]
    pub accept_session_messages: bool,
}

pub fn run(command: &ClaudeCommand, env: &Env) -> ExitCode {
    let (verb, result) = match command {
        ClaudeCommand::Install(args) => (
            "install",
            install(env, args.edit.dry_run, args.accept_session_messages),
        ),
        ClaudeCommand::Uninstall(args) => ("uninstall", uninstall(env, args.dry_run)),
    };
    exit("claude", verb, result)
}

/// Exit codes: 0 done, 1 refused or an I/O error, 2 no config dir for the agent.
pub fn exit(agent: &str, verb: &str, result: Result<(), EditError>) -> ExitCode {
    let Err(e) = result else {
        return ExitCode::SUCCESS;
    };
    crate::errln!("wakebridge {agent} {verb}: {e}");
    let usage = matches!(e, EditError::Home(_));
    ExitCode::from(if usage { 2 } else { 1 })
}

/// The settings file, or the file its symlink points at.
fn locate(env: &Env) -> Result<std::path::PathBuf, EditError> {
    let home = ClaudeHome::locate(env).map_err(|e| EditError::Home(e.to_string()))?;
    edit::followed(home.dir.join(SETTINGS_FILE))
}

fn install(env: &Env, dry_run: bool, accept: bool) -> Result<(), EditError> {
    let (file, exe) = (locate(env)?, edit::exe(env)?);
    // `crossSessionInbound` before install, from the bytes install reads.
    let mut inbound = None;
    edit::install(&file, dry_run, &format!("as {exe}"), |old| {
        let refused = edit::refused(&file);
        inbound = settings::wired(old.unwrap_or_default())
            .map_err(edit::refused(&file))?
            .inbound;
        settings::install(old, &exe, &settings::WIRING, accept).map_err(refused)
    })?;
    explain_inbound(inbound.as_ref(), accept, dry_run);
    Ok(())
}

/// Who may message the sessions (`crossSessionInbound`, `before` install) and what install did
/// about it: the choice is the user's, so install says what it means either way.
fn explain_inbound(before: Option<&serde_json::Value>, accept: bool, dry_run: bool) {
    let key = settings::INBOUND_KEY;
    let is_accept = before.and_then(|v| v.as_str()) == Some(settings::INBOUND_ACCEPT);
    let would = if dry_run { "would be" } else { "is now" };
    let text = match (before, accept) {
        (Some(_), _) if is_accept => format!(
            "{key} is already \"accept\": every session takes wakebridge's messages, and so any \
             process of yours (and your other Claude sessions) can message them."
        ),
        (before, true) => {
            let was = before.map_or("unset".to_owned(), |v| format!("{v}"));
            format!(
                "{key} {would} \"accept\" (it was {was}): sessions in bypass mode take \
                 wakebridge's messages without a human, and any process of yours (and your other \
                 Claude sessions) can message your sessions too; uninstall puts back what it was."
            )
        }
        (None, false) => format!(
            "{key} is unset: sessions started with --dangerously-skip-permissions (bypass mode) \
             hold wakebridge's messages for a human to answer. `wakebridge claude install --accept-session-messages` lets the \
             messages through, and also lets any process of yours (and your other Claude \
             sessions) message your sessions; that choice is yours."
        ),
        (Some(value), false) => format!(
            "{key} is {value}, your own setting; left as it is. `wakebridge claude install \
             --accept-session-messages` changes it to \"accept\", which lets wakebridge (and any \
             process of yours) message your sessions."
        ),
    };
    crate::outln!("");
    crate::outln!("{text}");
}

fn uninstall(env: &Env, dry_run: bool) -> Result<(), EditError> {
    let file = locate(env)?;
    edit::uninstall(&file, dry_run, |current, created| {
        let exe = edit::exe(env)?;
        settings::uninstall(current, &exe, created).map_err(edit::refused(&file))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claude::settings::Install;

    #[test]
    fn install_into_nothing_wires_what_print_settings_prints() {
        let exe = "/usr/local/bin/wakebridge";
        let Install::Changed { bytes, .. } =
            settings::install(None, exe, &settings::WIRING, false).unwrap()
        else {
            panic!("unchanged");
        };
        let installed: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let snippet = crate::cli::hook::settings_json(&format!("{exe} hook"));
        assert_eq!(installed["hooks"], snippet["hooks"]);
    }

    #[test]
    fn install_sets_the_status_line_deploy_shows() {
        let deploy: serde_json::Value =
            serde_json::from_str(include_str!("../../deploy/claude-statusline.json")).unwrap();
        let Install::Changed { bytes, .. } =
            settings::install(None, "wakebridge", &settings::WIRING, false).unwrap()
        else {
            panic!("unchanged");
        };
        let installed: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(installed["statusLine"], deploy["statusLine"]);
    }
}
