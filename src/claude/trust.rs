//! Marking a folder trusted in the `.claude.json` Claude Code reads
//! (`projects["<abs dir>"].hasTrustDialogAccepted = true`) so the trust dialog never appears.
//! Every other key is kept, the old file is backed up, the new one replaces it atomically, and
//! a concurrent writer (Claude Code rewrites the file often) is detected and retried once.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::{Map, Value};

// A config this creates and every backup are owner-only: the file holds account identifiers.
use crate::private_fs::FILE_MODE;

pub const TRUST_KEY: &str = "hasTrustDialogAccepted";
/// Infix of backup copies: `~/.claude.json.wakebridge-backup.<unix seconds>`.
pub const BACKUP_INFIX: &str = ".wakebridge-backup.";
/// Largest config read; real files are far smaller.
pub const MAX_CONFIG_BYTES: u64 = 64 * 1024 * 1024;
/// Read-modify-write attempts: a second collision means a writer is busy and a human should wait.
const ATTEMPTS: u32 = 2;
/// Backups with the same second get a counter suffix; past this many something is wrong.
const MAX_BACKUP_SUFFIX: u32 = 100;

/// Why the folder could not be marked trusted. The config file is unchanged on every variant.
#[derive(Debug, thiserror::Error)]
pub enum PreTrustError {
    #[error(transparent)]
    Home(#[from] crate::claude::home::HomeError),
    #[error("the folder to trust must be an absolute UTF-8 path, got {0:?}")]
    BadFolder(PathBuf),
    #[error("cannot read {path}: {source}; nothing was changed")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is larger than {MAX_CONFIG_BYTES} bytes; refusing to rewrite it")]
    TooLarge { path: PathBuf },
    #[error(
        "{path} is not valid JSON ({source}); refusing to overwrite it. Fix or move the file, or \
         launch without --pre-trust and let the launcher answer the trust dialog"
    )]
    NotJson {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path}: {what} is not a JSON object; refusing to overwrite it")]
    NotAnObject { path: PathBuf, what: String },
    #[error("cannot write the backup {path}: {source}; nothing was changed")]
    Backup {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}; the previous file is unchanged")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} kept changing while it was being updated (another program, probably a running \
         Claude Code, rewrites it); nothing was changed. Retry when no claude is starting"
    )]
    Concurrent { path: PathBuf },
}

/// What [`pre_trust`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreTrusted {
    /// The file updated; a symlink is followed to its target.
    pub config: PathBuf,
    /// The `projects` key set.
    pub project: String,
    pub backup: Option<PathBuf>,
    pub already_trusted: bool,
}

/// Mark `folder` trusted in `config`, creating the file (0600) if missing. `folder` should be
/// canonical: Claude Code keys projects by its real working directory.
pub fn pre_trust(config: &Path, folder: &Path) -> Result<PreTrusted, PreTrustError> {
    let project = folder
        .to_str()
        .filter(|_| folder.is_absolute())
        .ok_or_else(|| PreTrustError::BadFolder(folder.to_owned()))?
        .to_owned();
    // Follow a symlinked config (dotfile managers) so the link survives and its target changes.
    let config = match fs::canonicalize(config) {
        Ok(target) => target,
        Err(err) if err.kind() == ErrorKind::NotFound => config.to_owned(),
        Err(source) => {
            return Err(PreTrustError::Read {
                path: config.to_owned(),
                source,
            });
        }
    };
    let done = |backup, already_trusted| PreTrusted {
        config: config.clone(),
        project: project.clone(),
        backup,
        already_trusted,
    };
    for _ in 0..ATTEMPTS {
        let before = read_config(&config)?;
        let mut root = match &before {
            Some(read) => parse_root(&config, &read.bytes)?,
            None => Map::new(),
        };
        if !mark_trusted(&config, &mut root, &project)? {
            return Ok(done(None, true));
        }
        let text = serde_json::to_string_pretty(&Value::Object(root)).map_err(|err| {
            PreTrustError::Write {
                path: config.clone(),
                source: std::io::Error::other(err),
            }
        })?;
        let backup = match &before {
            Some(read) => Some(write_backup(&config, &read.bytes)?),
            None => None,
        };
        let mode = before.as_ref().map_or(FILE_MODE, |read| read.stamp.mode);
        let stamp = before.as_ref().map(|r| r.stamp);
        if replace_if_unchanged(&config, text.as_bytes(), mode, stamp)? {
            return Ok(done(backup, false));
        }
        // Someone else wrote meanwhile; the backup of what we read is stale.
        if let Some(backup) = backup {
            let _ = fs::remove_file(backup);
        }
    }
    Err(PreTrustError::Concurrent { path: config })
}

/// Identity of one version of the file: a rename changes the inode, a write size or mtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    ino: u64,
    dev: u64,
    len: u64,
    mtime: Option<SystemTime>,
    mode: u32,
}

impl Stamp {
    fn of(meta: &fs::Metadata) -> Self {
        Self {
            ino: meta.ino(),
            dev: meta.dev(),
            len: meta.len(),
            mtime: meta.modified().ok(),
            mode: meta.mode() & 0o7777,
        }
    }
}

struct ReadConfig {
    bytes: Vec<u8>,
    stamp: Stamp,
}

fn read_config(config: &Path) -> Result<Option<ReadConfig>, PreTrustError> {
    let read_err = |source| PreTrustError::Read {
        path: config.to_owned(),
        source,
    };
    let file = match File::open(config) {
        Ok(file) => file,
        Err(err) if err.kind() == ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(read_err(err)),
    };
    let meta = file.metadata().map_err(read_err)?;
    if !meta.is_file() {
        return Err(read_err(std::io::Error::other("not a regular file")));
    }
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(PreTrustError::TooLarge {
            path: config.to_owned(),
        });
    }
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(PreTrustError::TooLarge {
            path: config.to_owned(),
        });
    }
    Ok(Some(ReadConfig {
        bytes,
        stamp: Stamp::of(&meta),
    }))
}

fn parse_root(config: &Path, bytes: &[u8]) -> Result<Map<String, Value>, PreTrustError> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(root)) => Ok(root),
        Ok(_) => Err(PreTrustError::NotAnObject {
            path: config.to_owned(),
            what: "the top level".into(),
        }),
        Err(source) => Err(PreTrustError::NotJson {
            path: config.to_owned(),
            source,
        }),
    }
}

/// Set the flag; false when it was already set.
fn mark_trusted(
    config: &Path,
    root: &mut Map<String, Value>,
    project: &str,
) -> Result<bool, PreTrustError> {
    let not_object = |what: String| PreTrustError::NotAnObject {
        path: config.to_owned(),
        what,
    };
    let projects = root
        .entry("projects")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| not_object("\"projects\"".into()))?;
    let entry = projects
        .entry(project)
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| not_object(format!("projects[{project:?}]")))?;
    if entry.get(TRUST_KEY) == Some(&Value::Bool(true)) {
        return Ok(false);
    }
    entry.insert(TRUST_KEY.to_owned(), Value::Bool(true));
    Ok(true)
}

/// Copy the bytes read to `<config>.wakebridge-backup.<secs>[-n]`: 0600, synced, never replacing.
fn write_backup(config: &Path, bytes: &[u8]) -> Result<PathBuf, PreTrustError> {
    let seconds = crate::clock::now_s();
    let base = format!("{}{BACKUP_INFIX}{seconds}", config.display());
    for n in 0..MAX_BACKUP_SUFFIX {
        let path = PathBuf::from(if n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        let backup_err = |source| PreTrustError::Backup {
            path: path.clone(),
            source,
        };
        let mut file = match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .open(&path)
        {
            Ok(file) => file,
            Err(err) if err.kind() == ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(backup_err(err)),
        };
        let written = file.write_all(bytes).and_then(|()| file.sync_all());
        if let Err(err) = written {
            let _ = fs::remove_file(&path);
            return Err(backup_err(err));
        }
        forget_old_backups(config);
        return Ok(path);
    }
    Err(PreTrustError::Backup {
        path: PathBuf::from(base),
        source: std::io::Error::other("too many backups with the same timestamp"),
    })
}

/// Backups of one config file kept: a pre-trust per launch would otherwise pile them up.
pub const KEPT_BACKUPS: usize = 5;

fn forget_old_backups(config: &Path) {
    let (Some(dir), Some(name)) = (config.parent(), config.file_name()) else {
        return;
    };
    let prefix = format!("{}{BACKUP_INFIX}", name.to_string_lossy());
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut backups: Vec<(SystemTime, PathBuf)> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .filter_map(|e| {
            let meta = e.metadata().ok().filter(|m| m.file_type().is_file())?;
            Some((meta.modified().ok()?, e.path()))
        })
        .collect();
    backups.sort();
    let surplus = backups.len().saturating_sub(KEPT_BACKUPS);
    for (_, path) in backups.into_iter().take(surplus) {
        let _ = fs::remove_file(path);
    }
}

/// Write `bytes` to a temp file beside `config`, then rename it over `config` only if the file is
/// still the version that was read (`None`: none); false when someone else changed it meanwhile.
fn replace_if_unchanged(
    config: &Path,
    bytes: &[u8],
    mode: u32,
    expected: Option<Stamp>,
) -> Result<bool, PreTrustError> {
    let write_err = |source| PreTrustError::Write {
        path: config.to_owned(),
        source,
    };
    let dir = config
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if expected.is_none() {
        fs::create_dir_all(dir).map_err(write_err)?;
    }
    let unchanged = || match fs::metadata(config) {
        Ok(meta) => Ok(Some(Stamp::of(&meta)) == expected),
        Err(err) if err.kind() == ErrorKind::NotFound => Ok(expected.is_none()),
        Err(err) => Err(err),
    };
    let replaced = crate::private_fs::replace_if(config, bytes, ".wakebridge.", mode, unchanged)
        .map_err(write_err)?;
    // Make the rename durable; a failure here leaves the new file in place, so ignore it.
    if replaced && let Ok(dir) = File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(replaced)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::Permissions;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn keeps_other_keys_and_order_and_exact_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join(".claude.json");
        fs::write(
            &config,
            r#"{"z":1,"big":123456789012345678901234567890,"projects":{"/other":{"hasTrustDialogAccepted":false,"allowedTools":["x"]}},"a":{"b":[1.50,2]}}"#,
        )
        .unwrap();
        fs::set_permissions(&config, Permissions::from_mode(0o640)).unwrap();
        let done = pre_trust(&config, Path::new("/work/p")).unwrap();
        assert!(!done.already_trusted);
        let text = fs::read_to_string(&config).unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        let keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["z", "big", "projects", "a"]);
        assert!(text.contains("123456789012345678901234567890"));
        assert!(text.contains("1.50"));
        assert_eq!(value["projects"]["/work/p"][TRUST_KEY], Value::Bool(true));
        assert_eq!(value["projects"]["/other"][TRUST_KEY], Value::Bool(false));
        assert_eq!(
            fs::metadata(&config).unwrap().permissions().mode() & 0o777,
            0o640
        );
        let backup = done.backup.unwrap();
        assert!(backup.to_str().unwrap().contains(BACKUP_INFIX));
        assert!(fs::read_to_string(backup).unwrap().starts_with(r#"{"z":1"#));
        // Idempotent: a second run writes nothing.
        let again = pre_trust(&config, Path::new("/work/p")).unwrap();
        assert!(again.already_trusted);
        assert_eq!(again.backup, None);
    }

    #[test]
    fn refuses_invalid_json_and_non_objects_without_touching_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join(".claude.json");
        for bad in [&b"{\"a\": tru"[..], b"", b"[1,2]", br#"{"projects":[]}"#] {
            fs::write(&config, bad).unwrap();
            let err = pre_trust(&config, Path::new("/p")).unwrap_err();
            assert!(
                matches!(
                    err,
                    PreTrustError::NotJson { .. } | PreTrustError::NotAnObject { .. }
                ),
                "{err}"
            );
            assert_eq!(fs::read(&config).unwrap(), bad);
        }
        let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no backup or temp file left behind");
    }

    #[test]
    fn creates_a_missing_file_privately() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("sub").join(".claude.json");
        let done = pre_trust(&config, Path::new("/p")).unwrap();
        assert_eq!(done.backup, None);
        let value: Value = serde_json::from_slice(&fs::read(&config).unwrap()).unwrap();
        assert_eq!(value["projects"]["/p"][TRUST_KEY], Value::Bool(true));
        assert_eq!(
            fs::metadata(&config).unwrap().permissions().mode() & 0o777,
            FILE_MODE
        );
    }

    #[test]
    fn follows_a_symlinked_config() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("dotfiles.json");
        fs::write(&real, "{}").unwrap();
        let link = dir.path().join(".claude.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        pre_trust(&link, Path::new("/p")).unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        let value: Value = serde_json::from_slice(&fs::read(&real).unwrap()).unwrap();
        assert_eq!(value["projects"]["/p"][TRUST_KEY], Value::Bool(true));
    }

    #[test]
    fn a_concurrent_change_aborts_the_rename() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join(".claude.json");
        fs::write(&config, "{}").unwrap();
        let read = read_config(&config).unwrap().unwrap();
        // Another writer replaces the file after our read.
        fs::write(dir.path().join("other"), r#"{"theirs":true}"#).unwrap();
        fs::rename(dir.path().join("other"), &config).unwrap();
        let replaced =
            replace_if_unchanged(&config, b"{\"ours\":1}", 0o600, Some(read.stamp)).unwrap();
        assert!(!replaced);
        assert_eq!(fs::read_to_string(&config).unwrap(), r#"{"theirs":true}"#);
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "temp file removed");
    }

    #[test]
    fn relative_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join(".claude.json");
        assert!(matches!(
            pre_trust(&config, Path::new("rel")),
            Err(PreTrustError::BadFolder(_))
        ));
    }

    #[test]
    fn only_the_newest_backups_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join(".claude.json");
        for n in 0..KEPT_BACKUPS + 3 {
            fs::write(&config, format!("{{\"n\": {n}}}")).unwrap();
            write_backup(&config, format!("{{\"n\": {n}}}").as_bytes()).unwrap();
        }
        let backups: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(BACKUP_INFIX))
            .collect();
        assert_eq!(backups.len(), KEPT_BACKUPS, "{backups:?}");
        let newest = format!("{{\"n\": {}}}", KEPT_BACKUPS + 2);
        assert!(
            backups
                .iter()
                .any(|b| fs::read_to_string(dir.path().join(b)).unwrap() == newest),
            "the newest backup survives"
        );
    }
}
