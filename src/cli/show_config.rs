//! `wakebridge config [--check]`: the effective configuration with where each value came from,
//! or (`--check`) only whether it is valid. It runs `serve`'s own check (every section), so it
//! refuses exactly what `serve` refuses, with the same line and exit 2.

use std::process::ExitCode;

use clap::Args;

use crate::app::Validated;
use crate::config::explain::explain;
use crate::config::{self, Flags};
use crate::env::Env;

#[derive(Debug, Clone, Args)]
pub struct ConfigArgs {
    /// Only validate: print OK and any warnings (exit 0), or what is wrong (exit 2)
    #[arg(long)]
    pub check: bool,
    #[command(flatten)]
    pub serve: Flags,
}

pub fn run(check: bool, flags: &Flags, env: &Env) -> ExitCode {
    let config = match Validated::resolve(flags, env) {
        Ok(settings) => settings.config,
        Err(e) => return super::refused(e),
    };
    if check {
        let file = config.paths.config_file.as_ref();
        let file = file.map_or("no file".into(), |p| p.display().to_string());
        crate::outln!("wakebridge config: OK ({file})");
        for warning in &config.topology.warnings {
            crate::outln!("warning: {warning}");
        }
        return ExitCode::SUCCESS;
    }
    let explained = match explain(flags, env) {
        Ok(explained) => explained,
        Err(e) => return super::refused(e),
    };
    let default = config::default_config_file(env).map(|p| p.display().to_string());
    let default = default.unwrap_or("~/.config/wakebridge/config.toml".into());
    match &explained.config.paths.config_file {
        Some(file) => crate::outln!("# file: {}", file.display()),
        None => crate::outln!("# file: none ({default} does not exist; --config to name one)"),
    }
    let settings = &explained.settings;
    let widths = settings.iter().map(|s| s.key.len() + s.value.len());
    let width = widths.filter(|w| *w < 60).max().unwrap_or(0);
    for setting in settings {
        let line = format!("{} = {}", setting.key, setting.value);
        crate::outln!("{line:<pad$}  # {}", setting.origin, pad = width + 3);
    }
    // Not settings: commented, so the output still reads as a TOML file.
    match explained.secret_from {
        Some(variable) => crate::outln!("# secret: set (from {variable})"),
        None => crate::outln!("# secret: not set"),
    }
    for (what, value) in &explained.derived {
        crate::outln!("# {what}: {value}");
    }
    for warning in &explained.config.topology.warnings {
        crate::outln!("# warning: {warning}");
    }
    ExitCode::SUCCESS
}
