//! `wakebridge completions SHELL` and `wakebridge man [--out-dir DIR]`: shell completions and
//! man pages generated from the clap types themselves, so they cannot drift from the verbs.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::Cli;

#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell; e.g. `wakebridge completions zsh > ~/.zfunc/_wakebridge`
    pub shell: Shell,
}

#[derive(Debug, Clone, Args)]
pub struct ManArgs {
    /// Write wakebridge.1 and a wakebridge-VERB.1 page per verb into DIR (created) instead of
    /// printing wakebridge.1
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

pub fn completions(args: &CompletionsArgs) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    clap_complete::generate(args.shell, &mut Cli::command(), "wakebridge", &mut stdout);
    ExitCode::SUCCESS
}

pub fn man(args: &ManArgs) -> ExitCode {
    let command = Cli::command();
    let Err(e) = (match &args.out_dir {
        Some(dir) => std::fs::create_dir_all(dir)
            .and_then(|()| clap_mangen::generate_to(command, dir))
            .map_err(|e| format!("cannot write man pages into {}: {e}", dir.display())),
        None => clap_mangen::Man::new(command)
            .render(&mut std::io::stdout().lock())
            .map_err(|e| format!("cannot print the man page: {e}")),
    }) else {
        return ExitCode::SUCCESS;
    };
    crate::errln!("wakebridge man: {e}");
    ExitCode::from(2)
}
