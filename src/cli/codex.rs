//! `wakebridge codex install|uninstall`: wakebridge's hooks merged into Codex CLI's hooks.json
//! (`codex::hooks::WIRING`, through the file work every agent's install shares), and with
//! `--trust-hooks` their approval written into config.toml as Codex's own "Hooks need review"
//! writes it; without it, install says that Codex asks once at its next start. Uninstall takes
//! back both, and only what install wrote. Exit codes as `claude install`'s.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::claude::{EditArgs, exit};
use super::edit::{self, EditError};
use crate::claude::settings::{self, Created, Install, Uninstall};
use crate::codex::home::CodexHome;
use crate::codex::hooks::{self, WIRING};
use crate::env::Env;

#[derive(Debug, Clone, Subcommand)]
pub enum CodexCommand {
    /// Merge wakebridge's hooks into Codex CLI's hooks.json (a backup is written first and the
    /// change printed as a diff); your own hooks stay
    Install(InstallArgs),
    /// Take out exactly what install added, in hooks.json and config.toml
    Uninstall(EditArgs),
}

#[derive(Debug, Clone, Args)]
pub struct InstallArgs {
    #[command(flatten)]
    pub edit: EditArgs,
    /// Also approve wakebridge's hooks in config.toml, as Codex's "Hooks need review" screen
    /// would: they then run without that screen asking you at the next start
    #[arg(long)]
    pub trust_hooks: bool,
}

pub fn run(command: &CodexCommand, env: &Env) -> ExitCode {
    let (verb, result) = match command {
        CodexCommand::Install(args) => {
            ("install", install(env, args.edit.dry_run, args.trust_hooks))
        }
        CodexCommand::Uninstall(args) => ("uninstall", uninstall(env, args.dry_run)),
    };
    exit("codex", verb, result)
}

/// Codex's files: the hooks file as Codex names it (the approvals' key) and as written (a
/// symlink followed), and config.toml.
struct Files {
    named_hooks: PathBuf,
    hooks: PathBuf,
    config: PathBuf,
}

fn locate(env: &Env) -> Result<Files, EditError> {
    let home = CodexHome::locate(env).map_err(|e| EditError::Home(e.to_string()))?;
    Ok(Files {
        named_hooks: home.hooks_file(),
        hooks: edit::followed(home.hooks_file())?,
        config: edit::followed(home.config_file())?,
    })
}

fn install(env: &Env, dry_run: bool, trust: bool) -> Result<(), EditError> {
    let (files, exe) = (locate(env)?, edit::exe(env)?);
    let current = edit::read(&files.hooks)?.map(|(bytes, _)| bytes);
    let merged = settings::install(current.as_deref(), &exe, &WIRING, false)
        .map_err(edit::refused(&files.hooks))?;
    let after = match &merged {
        Install::Changed { bytes, .. } => bytes.clone(),
        Install::Unchanged => current.clone().unwrap_or_default(),
    };
    edit::install(&files.hooks, dry_run, &format!("as {exe}"), |_| Ok(merged))?;
    let command = settings::hook_command(&exe, &WIRING).map_err(edit::refused(&files.hooks))?;
    let approvals = hooks::approvals(&files.named_hooks, &after, &command);
    crate::outln!("");
    if !trust {
        crate::outln!(
            "Codex runs a new hook only once you approve it: at its next start it shows \"Hooks \
             need review\"; choose \"Trust all and continue\". Until then wakebridge does not \
             hear your Codex sessions. `wakebridge codex install --trust-hooks` approves \
             wakebridge's {} hooks in {} instead.",
            approvals.len(),
            files.config.display()
        );
        return Ok(());
    }
    let config = &files.config;
    edit::install(config, dry_run, "its hooks approved", |old| {
        let had_ours = old.is_some_and(|old| hooks::approved(old, &approvals) > 0);
        let trusted = hooks::trust(old, &approvals).map_err(edit::refused(config))?;
        Ok(match trusted {
            Some(bytes) => Install::Changed {
                bytes,
                created: Created::default(),
                had_ours,
            },
            None => Install::Unchanged,
        })
    })?;
    crate::outln!(
        "wakebridge's {} hooks are approved in {} as Codex itself approves a hook; any other \
         hook you add still asks",
        approvals.len(),
        config.display()
    );
    Ok(())
}

fn uninstall(env: &Env, dry_run: bool) -> Result<(), EditError> {
    let (files, exe) = (locate(env)?, edit::exe(env)?);
    // The approvals are of the hooks as install left them: read before they go.
    let current = edit::read(&files.hooks)?.map(|(bytes, _)| bytes);
    let command = settings::hook_command(&exe, &WIRING).map_err(edit::refused(&files.hooks))?;
    let approvals = (current.as_deref())
        .map(|bytes| hooks::approvals(&files.named_hooks, bytes, &command))
        .unwrap_or_default();
    edit::uninstall(&files.hooks, dry_run, |current, created| {
        let out = settings::uninstall(current, &exe, created);
        out.map_err(edit::refused(&files.hooks))
    })?;
    if approvals.is_empty() || !Path::new(&files.config).exists() {
        return Ok(());
    }
    edit::uninstall(
        &files.config,
        dry_run,
        |current, _| match hooks::distrust(current, &approvals)
            .map_err(edit::refused(&files.config))?
        {
            Some(bytes) => Ok(Uninstall::Changed(bytes)),
            None => Ok(Uninstall::NothingOurs),
        },
    )
}
