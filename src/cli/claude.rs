//! `wakebridge claude install|uninstall [--dry-run]`: wiring Claude Code to this binary in its
//! user settings file (`<CLAUDE_CONFIG_DIR or ~/.claude>/settings.json`) and taking it out
//! again. The edit itself is `claude::settings`'s (pure); this module owns the file work around
//! it: the settings file found (through a symlink to the file it points at, so a dotfiles link
//! stays a link), a backup of the previous bytes beside it before any change
//! (`settings.json.wakebridge-<n>.bak`), the new bytes written temp-then-rename with the file's
//! own mode, the unified diff printed, and a record beside it
//! (`settings.json.wakebridge-install.json`) of what install created and what it wrote, so that
//! uninstall can put the previous bytes back exactly while the file is untouched, and otherwise
//! removes only what is ours. A file that cannot be rewritten safely is refused before anything
//! is written. Exit codes: 0 done (or nothing to do), 1 refused or an I/O error, 2 no Claude
//! Code config dir.

use std::fs::OpenOptions;
use std::io::{self, ErrorKind, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::claude::home::{ClaudeHome, HomeError};
use crate::claude::settings::{self, Created, Install, SETTINGS_FILE, SettingsError, Uninstall};
use crate::env::Env;

/// Exit code when the file is refused or cannot be read or written.
const EXIT_FAILED: u8 = 1;
/// Exit code when Claude Code's config dir is unknown (HOME, CLAUDE_CONFIG_DIR).
const EXIT_USAGE: u8 = 2;
/// Mode of a settings file install creates: the user's alone, as the rest of `~/.claude`.
const NEW_FILE_MODE: u32 = 0o600;
/// Most numbered backups looked through for a free name: far more installs than anyone runs,
/// and a bound on the loop should the directory refuse every name.
const MAX_BACKUPS: u32 = 10_000;
/// The record's name: the settings file's, with this added.
const RECORD_SUFFIX: &str = ".wakebridge-install.json";
/// Prefix of the temp file a write renames over its target (hidden, beside it).
const TEMP_PREFIX: &str = ".settings.json.wakebridge.";

/// `wakebridge claude ...`: Claude Code's settings.
#[derive(Debug, Clone, Subcommand)]
pub enum ClaudeCommand {
    /// Merge wakebridge's hooks and status line into Claude Code's settings.json (a backup is
    /// written first and the change printed as a diff); an existing status line is kept, wrapped
    Install(EditArgs),
    /// Take out exactly what install added: the previous file back as it was when it is
    /// untouched since, else only wakebridge's entries (and the wrapped status line restored)
    Uninstall(EditArgs),
}

/// The flags both verbs take.
#[derive(Debug, Clone, Args)]
pub struct EditArgs {
    /// Print the diff only; write nothing
    #[arg(long)]
    pub dry_run: bool,
}

/// Why install or uninstall stopped. Each names the file and what to do.
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
    #[error(
        "{path} is a symlink whose target cannot be resolved ({source}); fix or remove the link"
    )]
    Link { path: PathBuf, source: io::Error },
    #[error("cannot read {path}: {source}; check its permissions")]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot {what} {path}: {source}; check the directory's permissions and free space")]
    Write {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

impl ClaudeError {
    fn exit_code(&self) -> ExitCode {
        match self {
            ClaudeError::Home(_) => ExitCode::from(EXIT_USAGE),
            _ => ExitCode::from(EXIT_FAILED),
        }
    }
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

/// Runs `wakebridge claude <command>` against Claude Code's config dir as `env` names it.
pub fn run(command: &ClaudeCommand, env: &Env) -> ExitCode {
    let (verb, result) = match command {
        ClaudeCommand::Install(args) => ("install", install(env, args.dry_run)),
        ClaudeCommand::Uninstall(args) => ("uninstall", uninstall(env, args.dry_run)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            crate::errln!("wakebridge claude {verb}: {e}");
            e.exit_code()
        }
    }
}

/// The settings file as found and as written (the file a symlink points at).
struct Target {
    file: PathBuf,
}

impl Target {
    fn locate(env: &Env) -> Result<Target, ClaudeError> {
        let path = ClaudeHome::locate(env)?.dir.join(SETTINGS_FILE);
        let file = match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                std::fs::canonicalize(&path).map_err(|source| ClaudeError::Link {
                    path: path.clone(),
                    source,
                })?
            }
            _ => path,
        };
        Ok(Target { file })
    }

    /// The file's bytes and mode, `None` when there is none.
    fn read(&self) -> Result<Option<(Vec<u8>, u32)>, ClaudeError> {
        let read = std::fs::read(&self.file).and_then(|bytes| {
            let mode = std::fs::metadata(&self.file)?.permissions().mode() & 0o7777;
            Ok((bytes, mode))
        });
        match read {
            Ok(found) => Ok(Some(found)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(source) => Err(ClaudeError::Read {
                path: self.file.clone(),
                source,
            }),
        }
    }

    /// `<file><suffix>`, beside it.
    fn sibling(&self, suffix: &str) -> PathBuf {
        let mut name = self.file.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    }

    fn record_path(&self) -> PathBuf {
        self.sibling(RECORD_SUFFIX)
    }

    /// The record install left, if it is there and readable.
    fn record(&self) -> Option<Record> {
        let path = self.record_path();
        let bytes = std::fs::read(&path).ok()?;
        match serde_json::from_slice(&bytes) {
            Ok(record) => Some(record),
            Err(e) => {
                crate::errln!(
                    "wakebridge claude: ignoring {} ({e}); only wakebridge's own entries are removed",
                    path.display()
                );
                None
            }
        }
    }

    fn write_record(&self, record: &Record) -> Result<(), ClaudeError> {
        let path = self.record_path();
        let mut bytes = serde_json::to_vec_pretty(record).unwrap_or_default();
        bytes.push(b'\n');
        crate::private_fs::replace(&path, &bytes, TEMP_PREFIX).map_err(|source| {
            ClaudeError::Write {
                what: "write the install record",
                path,
                source,
            }
        })
    }

    /// Writes `bytes` to the first free `<file>.wakebridge-<n>.bak` with `mode`, synced.
    fn backup(&self, bytes: &[u8], mode: u32) -> Result<PathBuf, ClaudeError> {
        let failed = |path: PathBuf, source| ClaudeError::Write {
            what: "write the backup",
            path,
            source,
        };
        for n in 1..=MAX_BACKUPS {
            let path = self.sibling(&format!(".wakebridge-{n}.bak"));
            let opened = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&path);
            let mut file = match opened {
                Ok(file) => file,
                Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(failed(path, e)),
            };
            let written = file
                .write_all(bytes)
                .and_then(|()| file.set_permissions(std::fs::Permissions::from_mode(mode)))
                .and_then(|()| file.sync_all());
            if let Err(e) = written {
                let _ = std::fs::remove_file(&path);
                return Err(failed(path, e));
            }
            return Ok(path);
        }
        Err(failed(
            self.sibling(".wakebridge-N.bak"),
            io::Error::other(format!("all {MAX_BACKUPS} backup names are taken")),
        ))
    }

    /// Replaces the file with `bytes` (temp file, rename), creating its directory if missing.
    fn write(&self, bytes: &[u8], mode: u32) -> Result<(), ClaudeError> {
        let failed = |what, source| ClaudeError::Write {
            what,
            path: self.file.clone(),
            source,
        };
        if let Some(dir) = self.file.parent() {
            crate::private_fs::create_dir(dir).map_err(|e| failed("create the directory of", e))?;
        }
        crate::private_fs::replace_with_mode(&self.file, bytes, TEMP_PREFIX, mode)
            .map_err(|e| failed("write", e))
    }
}

/// The running binary's absolute path, as a settings.json command names it.
fn exe(env: &Env) -> Result<String, ClaudeError> {
    let exe = super::own_binary(env).map_err(ClaudeError::Exe)?;
    exe.to_str()
        .map(str::to_owned)
        .ok_or(ClaudeError::ExeNotUtf8(exe))
}

fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The unified diff from `old` to `new` (`None`: no file).
fn diff(file: &Path, old: Option<&[u8]>, new: Option<&[u8]>) -> String {
    let name = file.display().to_string();
    let label = |side: Option<&[u8]>| side.map_or_else(|| "/dev/null".to_owned(), |_| name.clone());
    let (a, b) = (label(old), label(new));
    let old = String::from_utf8_lossy(old.unwrap_or_default());
    let new = String::from_utf8_lossy(new.unwrap_or_default());
    similar::TextDiff::from_lines(&*old, &*new)
        .unified_diff()
        .header(&a, &b)
        .to_string()
}

fn print_diff(text: &str) {
    for line in text.lines() {
        crate::outln!("{line}");
    }
}

fn install(env: &Env, dry_run: bool) -> Result<(), ClaudeError> {
    let target = Target::locate(env)?;
    let exe = exe(env)?;
    let current = target.read()?;
    let current_bytes = current.as_ref().map(|(bytes, _)| bytes.as_slice());
    let refused = |source| ClaudeError::Refused {
        path: target.file.clone(),
        source,
    };
    let (bytes, created, had_ours) =
        match settings::install(current_bytes, &exe).map_err(refused)? {
            Install::Unchanged => {
                crate::outln!(
                    "wakebridge is already installed in {} (as {exe}); nothing changed",
                    target.file.display()
                );
                return Ok(());
            }
            Install::Changed {
                bytes,
                created,
                had_ours,
            } => (bytes, created, had_ours),
        };
    print_diff(&diff(&target.file, current_bytes, Some(&bytes)));
    if dry_run {
        crate::outln!("dry run: {} not changed", target.file.display());
        return Ok(());
    }
    let previous = target.record();
    let backup = match &current {
        Some((old, mode)) => Some(target.backup(old, *mode)?),
        None => None,
    };
    let mode = current.as_ref().map_or(NEW_FILE_MODE, |(_, mode)| *mode);
    target.write(&bytes, mode)?;
    let record = match (had_ours, previous) {
        // A first install: what it would put back is what was there.
        (false, _) => Record {
            written_sha256: digest(&bytes),
            restore: backup
                .clone()
                .map_or(Restore::NoFile, |file| Restore::Backup { file }),
            created,
        },
        // An update keeps what the first install created; what it puts back byte for byte
        // only while the file was untouched since (else edits made since would be lost).
        (true, Some(record)) => {
            let untouched = current_bytes.is_some_and(|old| digest(old) == record.written_sha256);
            Record {
                written_sha256: digest(&bytes),
                restore: if untouched {
                    record.restore
                } else {
                    Restore::Unknown
                },
                created: merged(record.created, created),
            }
        }
        // Wired by hand before: the file before this run had wakebridge in it, so putting it
        // back would not take wakebridge out; uninstall removes ours instead.
        (true, None) => Record {
            written_sha256: digest(&bytes),
            restore: Restore::Unknown,
            created,
        },
    };
    target.write_record(&record)?;
    match backup {
        Some(backup) => crate::outln!(
            "installed into {}; the previous file is saved as {}",
            target.file.display(),
            backup.display()
        ),
        None => crate::outln!("installed into {} (a new file)", target.file.display()),
    }
    Ok(())
}

/// What two installs created between them.
fn merged(mut earlier: Created, later: Created) -> Created {
    earlier.hooks |= later.hooks;
    for event in later.events {
        if !earlier.events.contains(&event) {
            earlier.events.push(event);
        }
    }
    earlier
}

fn uninstall(env: &Env, dry_run: bool) -> Result<(), ClaudeError> {
    let target = Target::locate(env)?;
    let Some((current, mode)) = target.read()? else {
        crate::outln!(
            "there is no {}: nothing of wakebridge's to remove",
            target.file.display()
        );
        return Ok(());
    };
    let exe = exe(env)?;
    let record = target.record();
    let untouched = record
        .as_ref()
        .filter(|record| digest(&current) == record.written_sha256);
    // `Some(None)`: the file goes; `Some(Some(bytes))`: these bytes, exactly as they were.
    let exact: Option<Option<Vec<u8>>> = match untouched.map(|record| &record.restore) {
        Some(Restore::NoFile) => Some(None),
        Some(Restore::Backup { file }) => std::fs::read(file).ok().map(Some),
        Some(Restore::Unknown) | None => None,
    };
    let (new, exactly) = match exact {
        Some(new) => (new, true),
        None => {
            let created = record.map(|r| r.created).unwrap_or_default();
            let refused = |source| ClaudeError::Refused {
                path: target.file.clone(),
                source,
            };
            match settings::uninstall(&current, &exe, &created).map_err(refused)? {
                Uninstall::NothingOurs => {
                    crate::outln!(
                        "nothing of wakebridge's in {}; nothing changed",
                        target.file.display()
                    );
                    return Ok(());
                }
                Uninstall::Changed(bytes) => (Some(bytes), false),
            }
        }
    };
    print_diff(&diff(&target.file, Some(&current), new.as_deref()));
    if dry_run {
        crate::outln!("dry run: {} not changed", target.file.display());
        return Ok(());
    }
    // The user's own edits since install are in this file: keep a copy.
    let backup = if exactly {
        None
    } else {
        Some(target.backup(&current, mode)?)
    };
    match &new {
        Some(bytes) => target.write(bytes, mode)?,
        None => std::fs::remove_file(&target.file).map_err(|source| ClaudeError::Write {
            what: "remove",
            path: target.file.clone(),
            source,
        })?,
    }
    match std::fs::remove_file(target.record_path()) {
        Err(e) if e.kind() != ErrorKind::NotFound => crate::errln!(
            "wakebridge claude uninstall: could not remove {} ({e}); delete it by hand",
            target.record_path().display()
        ),
        _ => {}
    }
    match (new.is_some(), backup) {
        (false, _) => crate::outln!(
            "removed {}: there was none before install",
            target.file.display()
        ),
        (true, None) => crate::outln!(
            "restored {} as it was before install",
            target.file.display()
        ),
        (true, Some(backup)) => crate::outln!(
            "removed wakebridge from {}, your other changes kept; the previous file is saved as {}",
            target.file.display(),
            backup.display()
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
        let Install::Changed { bytes, .. } = settings::install(None, exe).unwrap() else {
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
        let Install::Changed { bytes, .. } = settings::install(None, "wakebridge").unwrap() else {
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
        let a = Created {
            hooks: true,
            events: vec!["Stop".into()],
        };
        let b = Created {
            hooks: false,
            events: vec!["Stop".into(), "SessionEnd".into()],
        };
        assert_eq!(
            merged(a, b),
            Created {
                hooks: true,
                events: vec!["Stop".into(), "SessionEnd".into()]
            }
        );
    }
}
