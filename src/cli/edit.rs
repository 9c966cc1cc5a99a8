//! The file work every `<agent> install|uninstall` shares, around an agent's (pure) edit of one
//! of its files: a symlink followed (a dotfiles link stays a link), a backup, an atomic write with
//! the file's mode, the diff printed, and a record beside it so that uninstall puts the previous
//! bytes back while the file is untouched since, else removes only what is ours.

use std::io::{self, ErrorKind};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::claude::settings::{Created, Install, Uninstall};
use crate::env::Env;
use crate::private_fs::{self, FILE_MODE};

const RECORD_SUFFIX: &str = ".wakebridge-install.json";

#[derive(Debug, thiserror::Error)]
pub enum EditError {
    /// The agent's config dir is unknown (exit code 2: a usage error).
    #[error("{0}")]
    Home(String),
    #[error("cannot tell where this wakebridge binary is ({0}); run it by its full path")]
    Exe(io::Error),
    #[error(
        "this wakebridge binary's path {0} is not UTF-8, which a hook command cannot hold; \
         install it at a plain path"
    )]
    ExeNotUtf8(PathBuf),
    #[error("cannot rewrite {path} safely: {reason}; nothing was changed")]
    Refused { path: PathBuf, reason: String },
    #[error("cannot {what} {path}: {source}; check its permissions and the free space")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> EditError {
    let path = path.to_owned();
    move |source| EditError::Io { what, path, source }
}

/// An agent's edit refused the file as it is.
pub fn refused<E: std::fmt::Display>(path: &Path) -> impl FnOnce(E) -> EditError {
    let path = path.to_owned();
    move |e| EditError::Refused {
        path,
        reason: e.to_string(),
    }
}

/// What install keeps beside the file for uninstall.
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
    /// There was no file.
    NoFile,
    /// The bytes are in this backup.
    Backup { file: PathBuf },
    /// Not known (the file had wakebridge in it already, edited since): remove ours only.
    Unknown,
}

/// `path`, or the file its symlink points at.
pub fn followed(path: PathBuf) -> Result<PathBuf, EditError> {
    match path.is_symlink() {
        true => std::fs::canonicalize(&path).map_err(io("resolve the symlink", &path)),
        false => Ok(path),
    }
}

/// The file's bytes and mode; `None`: no file.
pub fn read(file: &Path) -> Result<Option<(Vec<u8>, u32)>, EditError> {
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
            "wakebridge: ignoring {path} ({e}); only wakebridge's own entries are removed"
        );
    };
    serde_json::from_slice(&bytes).inspect_err(ignored).ok()
}

fn write(path: &Path, bytes: &[u8], mode: u32) -> Result<(), EditError> {
    private_fs::write(path, bytes, mode)
        .map(drop)
        .map_err(io("write", path))
}

fn backup(file: &Path, bytes: &[u8], mode: u32) -> Result<PathBuf, EditError> {
    private_fs::backup(file, bytes, mode).map_err(io("back up", file))
}

/// This binary's path, as a hook command names it.
pub fn exe(env: &Env) -> Result<String, EditError> {
    let exe = super::own_binary(env).map_err(EditError::Exe)?;
    let exe = exe.into_os_string().into_string();
    exe.map_err(|path| EditError::ExeNotUtf8(path.into()))
}

fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// `None`: no file.
pub fn diff(file: &Path, old: Option<&[u8]>, new: Option<&[u8]>) -> String {
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

/// Installs into `file` what `edit` makes of its bytes (`None`: no file), saying what it did;
/// `ours` says what of wakebridge's is there when nothing changes (`as /usr/bin/wakebridge`).
/// Returns whether the file now differs from before (false on a dry run, or nothing to do).
pub fn install(
    file: &Path,
    dry_run: bool,
    ours: &str,
    edit: impl FnOnce(Option<&[u8]>) -> Result<Install, EditError>,
) -> Result<bool, EditError> {
    let (current, name) = (read(file)?, file.display());
    let old = current.as_ref().map(|(bytes, _)| bytes.as_slice());
    let Install::Changed {
        bytes,
        created,
        had_ours,
    } = edit(old)?
    else {
        crate::outln!("wakebridge is already installed in {name} ({ours}); nothing changed");
        return Ok(false);
    };
    if !show(file, old, Some(&bytes), dry_run) {
        return Ok(false);
    }
    let previous = record(file);
    let backup = (current.as_ref())
        .map(|(old, mode)| backup(file, old, *mode))
        .transpose()?;
    write(file, &bytes, current.as_ref().map_or(FILE_MODE, |c| c.1))?;
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
    write(&record_path(file), &text, FILE_MODE)?;
    match backup.as_deref().map(Path::display) {
        Some(backup) => {
            crate::outln!("installed into {name}; the previous file is saved as {backup}");
        }
        None => crate::outln!("installed into {name} (a new file)"),
    }
    Ok(true)
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

/// Takes wakebridge out of `file`: the bytes from before install while the file is as install
/// left it, else what `edit` makes of it (given what install created).
pub fn uninstall(
    file: &Path,
    dry_run: bool,
    edit: impl FnOnce(&[u8], &Created) -> Result<Uninstall, EditError>,
) -> Result<(), EditError> {
    let name = file.display();
    let Some((current, mode)) = read(file)? else {
        crate::outln!("there is no {name}: nothing of wakebridge's to remove");
        return Ok(());
    };
    let record = record(file);
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
        None => match edit(&current, &created)? {
            Uninstall::Changed(bytes) => Some(bytes),
            Uninstall::NothingOurs => {
                crate::outln!("nothing of wakebridge's in {name}; nothing changed");
                return Ok(());
            }
        },
    };
    if !show(file, Some(&current), new.as_deref(), dry_run) {
        return Ok(());
    }
    // The user's own edits since install are in this file: keep a copy.
    let backup = (!exactly)
        .then(|| backup(file, &current, mode))
        .transpose()?;
    match &new {
        Some(bytes) => write(file, bytes, mode)?,
        None => std::fs::remove_file(file).map_err(io("remove", file))?,
    }
    let record = record_path(file);
    if let Err(e) = std::fs::remove_file(&record)
        && e.kind() != ErrorKind::NotFound
    {
        let record = record.display();
        crate::errln!("wakebridge uninstall: could not remove {record} ({e}); delete it by hand");
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
            Some(crate::claude::settings::Accepted { previous })
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
