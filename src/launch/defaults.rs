//! `[launch]`, validated once: what `wakebridge launch` starts when no command follows `--`,
//! and what a restart inside `serve` starts.

use std::time::Duration;

use crate::config::LaunchSettings;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchDefaults {
    pub command: Vec<String>,
    pub timeout: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchSettingsError {
    #[error(
        "launch.timeout is 0; give the agent time to reach its prompt, e.g. \"90s\" \
         (WAKEBRIDGE_LAUNCH__TIMEOUT)"
    )]
    ZeroTimeout,
    #[error(
        "launch.command is empty; give the agent to start, e.g. [\"claude\"] \
         (WAKEBRIDGE_LAUNCH__COMMAND; `wakebridge launch` also takes it after --)"
    )]
    NoCommand,
}

impl LaunchDefaults {
    pub fn from_settings(settings: &LaunchSettings) -> Result<Self, LaunchSettingsError> {
        Ok(Self {
            command: Self::command(&settings.command)?,
            timeout: Self::timeout(settings.timeout)?,
        })
    }

    /// `launch.command`, refused when it names no program (an empty list, or a blank first
    /// element tmux would fail to run).
    pub fn command(command: &[String]) -> Result<Vec<String>, LaunchSettingsError> {
        let names_program = command.first().is_some_and(|p| !p.trim().is_empty());
        (names_program.then(|| command.to_vec())).ok_or(LaunchSettingsError::NoCommand)
    }

    pub fn timeout(timeout: Duration) -> Result<Duration, LaunchSettingsError> {
        (!timeout.is_zero())
            .then_some(timeout)
            .ok_or(LaunchSettingsError::ZeroTimeout)
    }
}
