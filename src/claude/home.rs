//! Where Claude Code keeps its things: `$CLAUDE_CONFIG_DIR` (absolute) holding `.claude.json`,
//! else `~/.claude` and `~/.claude.json`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::env::Env;
use crate::wire::session_id::SessionId;

/// The variable that moves Claude Code's config dir away from `~/.claude`.
pub const CONFIG_DIR_ENV: &str = "CLAUDE_CONFIG_DIR";
pub const SESSIONS_DIR: &str = "sessions";
pub const PROJECTS_DIR: &str = "projects";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HomeError {
    #[error("HOME is not set to an absolute path, so ~/.claude is unknown; set HOME")]
    NoHome,
    #[error(
        "CLAUDE_CONFIG_DIR is {0:?}, not an absolute path; set it to an absolute path or unset it"
    )]
    RelativeConfigDir(String),
}

/// Claude Code's config dir and its global state file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaudeHome {
    /// `$CLAUDE_CONFIG_DIR`, else `~/.claude`.
    pub dir: PathBuf,
    /// `<dir>/.claude.json` when `CLAUDE_CONFIG_DIR` is set, else `~/.claude.json`.
    pub state_file: PathBuf,
}

impl ClaudeHome {
    /// Where Claude Code, started with `env`, keeps its things.
    pub fn locate(env: &Env) -> Result<ClaudeHome, HomeError> {
        if let Some(dir) = env.nonempty(CONFIG_DIR_ENV) {
            let dir = PathBuf::from(dir);
            if !dir.is_absolute() {
                return Err(HomeError::RelativeConfigDir(dir.display().to_string()));
            }
            return Ok(ClaudeHome::at(dir));
        }
        let home = env.absolute_path("HOME").ok_or(HomeError::NoHome)?;
        Ok(ClaudeHome {
            dir: home.join(".claude"),
            state_file: home.join(".claude.json"),
        })
    }

    /// The config dir `dir` as `CLAUDE_CONFIG_DIR` would name it (the state file inside it).
    pub fn at(dir: PathBuf) -> ClaudeHome {
        let state_file = dir.join(".claude.json");
        ClaudeHome { dir, state_file }
    }

    pub fn sessions(&self) -> PathBuf {
        self.dir.join(SESSIONS_DIR)
    }

    pub fn projects(&self) -> PathBuf {
        self.dir.join(PROJECTS_DIR)
    }

    /// The state file Claude Code reads: `state_file`, except that a non-empty legacy
    /// `<dir>/.config.json` wins while the main file is missing or empty.
    pub fn state_file_in_use(&self) -> PathBuf {
        let non_empty_file =
            |path: &Path| std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() > 0);
        let legacy = self.dir.join(".config.json");
        if non_empty_file(&legacy) && !non_empty_file(&self.state_file) {
            legacy
        } else {
            self.state_file.clone()
        }
    }
}

/// Where Claude Code keeps subagent transcripts, which never describe the session.
const SUBAGENTS_DIR: &str = "subagents";

pub fn is_under_subagents(path: &Path) -> bool {
    path.components()
        .any(|c| c.as_os_str() == OsStr::new(SUBAGENTS_DIR))
}

/// The transcript of `session_id`: the hinted main transcript, else the newest in
/// `projects/*/` of the config dirs `homes`.
pub fn find_transcript_in(
    homes: &[PathBuf],
    session_id: &str,
    hinted_path: Option<&Path>,
) -> Option<PathBuf> {
    if let Some(hint) = hinted_path
        && hint.is_file()
        && !is_under_subagents(hint)
    {
        return Some(hint.to_owned());
    }
    if !SessionId::is_valid(session_id) {
        return None;
    }
    let file_name = format!("{session_id}.jsonl");
    homes
        .iter()
        .filter_map(|home| std::fs::read_dir(home.join(PROJECTS_DIR)).ok())
        .flat_map(|entries| entries.filter_map(Result::ok))
        .filter(|entry| entry.file_name() != OsStr::new(SUBAGENTS_DIR))
        .map(|entry| entry.path().join(&file_name))
        .filter_map(|candidate| {
            let meta = std::fs::metadata(&candidate).ok()?;
            meta.is_file().then(|| (meta.modified().ok(), candidate))
        })
        .max_by_key(|(modified, _)| *modified)
        .map(|(_, path)| path)
}

/// The account (config dir) a transcript belongs to: `<config>/projects/<project>/<session>.jsonl`.
pub fn account_of(transcript: &Path) -> Option<PathBuf> {
    let projects = transcript.parent()?.parent()?;
    (projects.file_name()? == "projects").then(|| projects.parent().map(Path::to_owned))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_account_is_the_config_directory_above_projects() {
        let t = Path::new("/home/u/.claude/projects/-home-u-p/abc.jsonl");
        assert_eq!(account_of(t), Some(PathBuf::from("/home/u/.claude")));
        assert_eq!(account_of(Path::new("/tmp/x/abc.jsonl")), None);
        assert_eq!(account_of(Path::new("abc.jsonl")), None);
    }

    #[test]
    fn the_config_dir_replaces_dot_claude_and_takes_the_state_file_with_it() {
        let home = ClaudeHome::locate(&Env::from_pairs([("HOME", "/home/u")])).unwrap();
        assert_eq!(home.dir, PathBuf::from("/home/u/.claude"));
        assert_eq!(home.state_file, PathBuf::from("/home/u/.claude.json"));
        assert_eq!(home.sessions(), PathBuf::from("/home/u/.claude/sessions"));
        let moved = ClaudeHome::locate(&Env::from_pairs([
            ("HOME", "/home/u"),
            (CONFIG_DIR_ENV, "/cfg"),
        ]))
        .unwrap();
        assert_eq!(moved.dir, PathBuf::from("/cfg"));
        assert_eq!(moved.state_file, PathBuf::from("/cfg/.claude.json"));
        assert_eq!(moved.projects(), PathBuf::from("/cfg/projects"));
    }

    #[test]
    fn relative_or_missing_places_are_refused_and_empty_means_unset() {
        assert_eq!(
            ClaudeHome::locate(&Env::from_pairs([(CONFIG_DIR_ENV, "rel")])),
            Err(HomeError::RelativeConfigDir("rel".into()))
        );
        assert_eq!(ClaudeHome::locate(&Env::empty()), Err(HomeError::NoHome));
        let empty = ClaudeHome::locate(&Env::from_pairs([("HOME", "/h"), (CONFIG_DIR_ENV, "")]));
        assert_eq!(empty.map(|h| h.dir), Ok(PathBuf::from("/h/.claude")));
    }

    #[test]
    fn a_legacy_state_file_wins_while_the_main_one_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::from_pairs([(CONFIG_DIR_ENV, dir.path().to_str().unwrap())]);
        let home = ClaudeHome::locate(&env).unwrap();
        assert_eq!(home.state_file_in_use(), dir.path().join(".claude.json"));
        std::fs::write(dir.path().join(".config.json"), "{}").unwrap();
        assert_eq!(home.state_file_in_use(), dir.path().join(".config.json"));
        std::fs::write(dir.path().join(".claude.json"), "{}").unwrap();
        assert_eq!(home.state_file_in_use(), dir.path().join(".claude.json"));
    }
}
