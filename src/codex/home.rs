//! Codex CLI's home: `$CODEX_HOME`, else `~/.codex`, and the files wakebridge reads or edits
//! there.

use std::path::PathBuf;

use crate::env::Env;

pub const HOME_ENV: &str = "CODEX_HOME";
/// Its hooks, in Claude Code's shape.
pub const HOOKS_FILE: &str = "hooks.json";
/// Its settings, and each hook's trust (`[hooks.state."<key>"] trusted_hash`).
pub const CONFIG_FILE: &str = "config.toml";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HomeError {
    #[error("HOME is not set to an absolute path, so ~/.codex is unknown; set HOME")]
    NoHome,
    #[error("CODEX_HOME is {0:?}, not an absolute path; set it to an absolute path or unset it")]
    RelativeHome(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodexHome {
    pub dir: PathBuf,
}

impl CodexHome {
    pub fn locate(env: &Env) -> Result<CodexHome, HomeError> {
        if let Some(dir) = env.nonempty(HOME_ENV) {
            let dir = PathBuf::from(dir);
            if !dir.is_absolute() {
                return Err(HomeError::RelativeHome(dir.display().to_string()));
            }
            // As Codex resolves it: its hooks' approval keys name the resolved path.
            let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
            return Ok(CodexHome { dir });
        }
        let home = env.absolute_path("HOME").ok_or(HomeError::NoHome)?;
        Ok(CodexHome {
            dir: home.join(".codex"),
        })
    }

    pub fn hooks_file(&self) -> PathBuf {
        self.dir.join(HOOKS_FILE)
    }

    pub fn config_file(&self) -> PathBuf {
        self.dir.join(CONFIG_FILE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_home_is_the_variable_else_dot_codex_in_home() {
        let env = Env::from_pairs([("HOME", "/h"), ("CODEX_HOME", "/c")]);
        assert_eq!(
            CodexHome::locate(&env).unwrap().hooks_file(),
            PathBuf::from("/c/hooks.json")
        );
        let env = Env::from_pairs([("HOME", "/h")]);
        assert_eq!(
            CodexHome::locate(&env).unwrap().dir,
            PathBuf::from("/h/.codex")
        );
        let env = Env::from_pairs([("HOME", "/h"), ("CODEX_HOME", "rel")]);
        assert_eq!(
            CodexHome::locate(&env),
            Err(HomeError::RelativeHome("rel".into()))
        );
        assert_eq!(CodexHome::locate(&Env::empty()), Err(HomeError::NoHome));
    }
}
