//! `wakebridge claude install|uninstall`: the file work around `claude::settings`'s (pure) edit:
//! a symlink followed (a dotfiles link stays a link), a backup, an atomic write with the file's
//! mode, the diff printed, and a record beside it so that uninstall puts the previous bytes back
//! while the file is untouched, else removes only what is ours. Exit codes: 0 done, 1 refused
//! or an I/O error, 2 no Claude Code config dir.

use std::io::{self, ErrorKind};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::claude::home::{ClaudeHome, HomeError};
use crate::claude::settings::{self, Created, Install, SETTINGS_FILE, SettingsError, Uninstall};
use crate::env::Env;
use crate::private_fs::{self, FILE_MODE};

const RECORD_SUFFIX: &str = ".wakebridge-install.json";

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

#[derive(Debug, thiserror::Error)]
pub enum ClaudeError {
    #[error("{0}")]
    Home(#[from] HomeError),
    #[error("cannot tell where this wakebridge binary is ({0}); run it by its full path")]
    Exe(io::Error),
    #[error(
        "this wakebridge binary's path {0} is not UTF-8, which a settings.json command cannot \
         hold; install it at a plain path"
    )]
    ExeNotUtf8(PathBuf),
    #[error("cannot rewrite {path} safely: {source}; nothing was changed")]
    Refused {
        path: PathBuf,
        source: SettingsError,
    },
    #[error("cannot {what} {path}: {source}; check its permissions and the free space")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> ClaudeError {
    let path = path.to_owned();
    move |source| ClaudeError::Io { what, path, source }
}

/// What install keeps beside the settings file for uninstall.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Record {
    /// SHA-256 (hex) of the bytes install last wrote.
    written_sha256: String,
    /// What uninstall puts back while the file is still exactly those bytes.
    restore: Restore,
    /// The keys install created (removed by uninstall once empty).
    created: Created,
}

/// The file as it was before wakebridge was first installed into it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Restore {
    /// There was no settings file.
    NoFile,
    /// The bytes are in this backup.
    Backup { file: PathBuf },
    /// Not known (the file had wakebridge in it already, edited since): remove ours only.
    Unknown,
}

pub fn run(command: &ClaudeCommand, env: &Env) -> ExitCode {
    let (verb, result) = match command {
        ClaudeCommand::Install(args) => (
            "install",
            install(env, args.edit.dry_run, args.accept_session_messages),
        ),
        ClaudeCommand::Uninstall(args) => ("uninstall", uninstall(env, args.dry_run)),
    };
    let Err(e) = result else {
        return ExitCode::SUCCESS;
    };
    crate::errln!("wakebridge claude {verb}: {e}");
    let usage = matches!(e, ClaudeError::Home(_));
    ExitCode::from(if usage { 2 } else { 1 })
}

/// The settings file, or the file its symlink points at.
fn locate(env: &Env) -> Result<PathBuf, ClaudeError> {
    let path = ClaudeHome::locate(env)?.dir.join(SETTINGS_FILE);
    match path.is_symlink() {
        true => std::fs::canonicalize(&path).map_err(io("resolve the symlink", &path)),
        false => Ok(path),
    }
}

fn read(file: &Path) -> Result<Option<(Vec<u8>, u32)>, ClaudeError> {
    let read = std::fs::read(file).and_then(|b| Ok((b, std::fs::metadata(file)?.mode() & 0o7777)));
    match read {
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        read => read.map(Some).map_err(io("read", file)),
    }
}

fn record_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(RECORD_SUFFIX);
    name.into()
}

fn record(file: &Path) -> Option<Record> {
    let path = record_path(file);
    let bytes = std::fs::read(&path).ok()?;
    let ignored = |e: &serde_json::Error| {
        let path = path.display();
        crate::errln!(
            "wakebridge claude: ignoring {path} ({e}); only wakebridge's own entries are removed"
        );
    };
    serde_json::from_slice(&bytes).inspect_err(ignored).ok()
}

fn write(path: &Path, bytes: &[u8], mode: u32) -> Result<(), ClaudeError> {
    private_fs::write(path, bytes, mode)
        .map(drop)
        .map_err(io("write", path))
}

fn backup(file: &Path, bytes: &[u8], mode: u32) -> Result<PathBuf, ClaudeError> {
    private_fs::backup(file, bytes, mode).map_err(io("back up", file))
}

fn refused(path: &Path) -> impl FnOnce(SettingsError) -> ClaudeError {
    let path = path.to_owned();
    move |source| ClaudeError::Refused { path, source }
}

fn exe(env: &Env) -> Result<String, ClaudeError> {
    let exe = super::own_binary(env).map_err(ClaudeError::Exe)?;
    let exe = exe.into_os_string().into_string();
    exe.map_err(|path| ClaudeError::ExeNotUtf8(path.into()))
}

fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// `None`: no file.
fn diff(file: &Path, old: Option<&[u8]>, new: Option<&[u8]>) -> String {
    let name = file.display().to_string();
    let label = |side: Option<&[u8]>| side.map_or("/dev/null", |_| name.as_str());
    let (a, b) = (label(old), label(new));
    let old = String::from_utf8_lossy(old.unwrap_or_default());
    let new = String::from_utf8_lossy(new.unwrap_or_default());
    let diff = similar::TextDiff::from_lines(&*old, &*new);
    diff.unified_diff().header(a, b).to_string()
}

/// Prints the diff; false (and says so) on a dry run.
fn show(file: &Path, old: Option<&[u8]>, new: Option<&[u8]>, dry_run: bool) -> bool {
    for line in diff(file, old, new).lines() {
        crate::outln!("{line}");
    }
    if dry_run {
        crate::outln!("dry run: {} not changed", file.display());
    }
    !dry_run
}

fn install(env: &Env, dry_run: bool, accept: bool) -> Result<(), ClaudeError> {
    let file = locate(env)?;
    let (exe, current, name) = (exe(env)?, read(&file)?, file.display());
    let old = current.as_ref().map(|(bytes, _)| bytes.as_slice());
    let installed = settings::install(old, &exe, accept).map_err(refused(&file))?;
    let inbound = settings::wired(old.unwrap_or_default()).map_err(refused(&file))?;
    let Install::Changed {
        bytes,
        created,
        had_ours,
    } = installed
    else {
        crate::outln!("wakebridge is already installed in {name} (as {exe}); nothing changed");
        explain_inbound(inbound.inbound.as_ref(), accept, dry_run);
        return Ok(());
    };
    let written = show(&file, old, Some(&bytes), dry_run);
    explain_inbound(inbound.inbound.as_ref(), accept, dry_run);
    if !written {
        return Ok(());
    }
    let previous = record(&file);
    let backup = (current.as_ref())
        .map(|(old, mode)| backup(&file, old, *mode))
        .transpose()?;
    write(&file, &bytes, current.as_ref().map_or(FILE_MODE, |c| c.1))?;
    // A first install puts back what was there. An update keeps what the first one created, and
    // what it puts back only while the file was untouched since (else edits made since would be
    // lost). Wired by hand before, the file had wakebridge in it: uninstall removes ours instead.
    let (restore, created) = match (had_ours, previous) {
        (false, _) => (
            backup
                .clone()
                .map_or(Restore::NoFile, |file| Restore::Backup { file }),
            created,
        ),
        (true, Some(r)) if old.is_some_and(|old| digest(old) == r.written_sha256) => {
            (r.restore, merged(r.created, created))
        }
        (true, Some(r)) => (Restore::Unknown, merged(r.created, created)),
        (true, None) => (Restore::Unknown, created),
    };
    let record = Record {
        written_sha256: digest(&bytes),
        restore,
        created,
    };
    let mut text = serde_json::to_vec_pretty(&record).unwrap_or_default();
    text.push(b'\n');
    write(&record_path(&file), &text, FILE_MODE)?;
    match backup.as_deref().map(Path::display) {
        Some(backup) => {
            crate::outln!("installed into {name}; the previous file is saved as {backup}");
        }
        None => crate::outln!("installed into {name} (a new file)"),
    }
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

/// What two installs created between them; `crossSessionInbound`'s value before the first one
/// that set it is what uninstall puts back.
fn merged(mut earlier: Created, mut later: Created) -> Created {
    earlier.hooks |= later.hooks;
    earlier.accepted = earlier.accepted.or(later.accepted);
    // An install creates each event key at most once.
    later.events.retain(|event| !earlier.events.contains(event));
    earlier.events.append(&mut later.events);
    earlier
}

fn uninstall(env: &Env, dry_run: bool) -> Result<(), ClaudeError> {
    let file = locate(env)?;
    let name = file.display();
    let Some((current, mode)) = read(&file)? else {
        crate::outln!("there is no {name}: nothing of wakebridge's to remove");
        return Ok(());
    };
    let (exe, record) = (exe(env)?, record(&file));
    let untouched = record
        .as_ref()
        .filter(|r| digest(&current) == r.written_sha256);
    // While the file is as install left it, what was there comes back exactly: `Some(None)` no
    // file, `Some(Some(bytes))` those bytes. Else only ours is taken out.
    let exact = match untouched.map(|record| &record.restore) {
        Some(Restore::NoFile) => Some(None),
        Some(Restore::Backup { file }) => std::fs::read(file).ok().map(Some),
        Some(Restore::Unknown) | None => None,
    };
    let exactly = exact.is_some();
    let created = record.map(|r| r.created).unwrap_or_default();
    let new = match exact {
        Some(new) => new,
        None => match settings::uninstall(&current, &exe, &created).map_err(refused(&file))? {
            Uninstall::Changed(bytes) => Some(bytes),
            Uninstall::NothingOurs => {
                crate::outln!("nothing of wakebridge's in {name}; nothing changed");
                return Ok(());
            }
        },
    };
    if !show(&file, Some(&current), new.as_deref(), dry_run) {
        return Ok(());
    }
    // The user's own edits since install are in this file: keep a copy.
    let backup = (!exactly)
        .then(|| backup(&file, &current, mode))
        .transpose()?;
    match &new {
        Some(bytes) => write(&file, bytes, mode)?,
        None => std::fs::remove_file(&file).map_err(io("remove", &file))?,
    }
    let record = record_path(&file);
    if let Err(e) = std::fs::remove_file(&record)
        && e.kind() != ErrorKind::NotFound
    {
        let record = record.display();
        crate::errln!(
            "wakebridge claude uninstall: could not remove {record} ({e}); delete it by hand"
        );
    }
    match (new.is_some(), backup.as_deref().map(Path::display)) {
        (false, _) => crate::outln!("removed {name}: there was none before install"),
        (true, None) => crate::outln!("restored {name} as it was before install"),
        (true, Some(backup)) => crate::outln!(
            "removed wakebridge from {name}, your other changes kept; the previous file is saved as {backup}"
        ),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_into_nothing_wires_what_print_settings_prints() {
        let exe = "/usr/local/bin/wakebridge";
        let Install::Changed { bytes, .. } = settings::install(None, exe, false).unwrap() else {
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
        let Install::Changed { bytes, .. } = settings::install(None, "wakebridge", false).unwrap()
        else {
            panic!("unchanged");
        };
        let installed: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(installed["statusLine"], deploy["statusLine"]);
    }

    #[test]
    fn a_diff_names_a_new_file_as_from_nothing() {
        let text = diff(Path::new("/h/.claude/settings.json"), None, Some(b"{}\n"));
        assert!(
            text.starts_with("--- /dev/null\n+++ /h/.claude/settings.json\n"),
            "{text}"
        );
        assert!(text.contains("+{}"));
    }

    #[test]
    fn two_installs_created_what_either_did() {
        let before = |was: &str| {
            let previous = Some(serde_json::Value::String(was.into()));
            Some(settings::Accepted { previous })
        };
        let a = Created {
            hooks: true,
            events: vec!["Stop".into()],
            accepted: before("hold"),
        };
        let b = Created {
            hooks: false,
            events: vec!["Stop".into(), "SessionEnd".into()],
            accepted: before("accept"),
        };
        assert_eq!(
            merged(a, b),
            Created {
                hooks: true,
                events: vec!["Stop".into(), "SessionEnd".into()],
                accepted: before("hold"),
            }
        );
    }
}
