//! Claude Code's live session registry, `<config dir>/sessions/<pid>.json` (undocumented):
//! `sessionId`, `pid`, `version`, `status` (`busy` / `idle` / `waiting`), `messagingSocketPath`
//! (its inbox, 2.1.224+), deleted when the session exits.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::reading::inbox::Inbox;
use crate::reading::registry::{RegistryReading, SessionList};
use crate::wakedir::printable::is_valid_string;

/// Largest registry file read: real ones are about 400 bytes; anything far larger is not ours.
const MAX_FILE_BYTES: u64 = 64 * 1024;
const MAX_SESSION_ID_CHARS: usize = 200;
/// Most files looked at per read, so a directory filled by something else costs a bounded scan.
const MAX_FILES: usize = 2048;

/// Why the registry could not be read (a missing directory is not an error: no sessions).
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error(
        "cannot list Claude Code's session registry {}: {source}; check the directory's \
         permissions or set {} to the config dir Claude Code uses",
        dir.display(),
        crate::claude::home::CONFIG_DIR_ENV
    )]
    List {
        dir: PathBuf,
        source: std::io::Error,
    },
}

/// One `<pid>.json` as far as wakebridge reads it: `Value` leaves, so a field of a surprising
/// type is lost alone; only `sessionId` must be a string.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct RegistryFile {
    session_id: String,
    pid: Option<Value>,
    status: Option<Value>,
    status_updated_at: Option<Value>,
    updated_at: Option<Value>,
    version: Option<Value>,
    messaging_socket_path: Option<Value>,
}

impl RegistryFile {
    /// The file if it is a regular file (no symlink followed) of at most `MAX_FILE_BYTES`.
    fn read(path: &Path) -> Option<RegistryFile> {
        let file = crate::private_fs::open_read(path).ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
            return None;
        }
        let mut text = String::new();
        file.take(MAX_FILE_BYTES).read_to_string(&mut text).ok()?;
        serde_json::from_str(&text).ok()
    }

    fn text(value: &Option<Value>) -> Option<String> {
        value.as_ref()?.as_str().map(str::to_owned)
    }
}

/// Every `<pid>.json` of a listing that parses, with the pid its name gives (at most
/// [`MAX_FILES`] names looked at).
fn files(entries: std::fs::ReadDir) -> impl Iterator<Item = (u32, RegistryFile)> {
    entries.flatten().take(MAX_FILES).filter_map(|entry| {
        let name = entry.file_name();
        let pid = name.to_str()?.strip_suffix(".json")?.parse().ok()?;
        Some((pid, RegistryFile::read(&entry.path())?))
    })
}

/// Reads every `<pid>.json` in `dir` into session id → reading, skipping unreadable files and
/// dead processes' (a crash leaves its file behind); of two for one session the newer wins.
pub fn read_registry(dir: &Path) -> Result<HashMap<String, RegistryReading>, RegistryError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(source) => {
            return Err(RegistryError::List {
                dir: dir.to_path_buf(),
                source,
            });
        }
    };
    let mut found: HashMap<String, RegistryReading> = HashMap::new();
    for (file_pid, file) in files(entries) {
        let Some(Ok(status)) = file.status.as_ref().and_then(Value::as_str).map(str::parse) else {
            continue;
        };
        let pid = file.pid.as_ref().and_then(Value::as_u64);
        if !process_alive(pid.and_then(|p| u32::try_from(p).ok()).unwrap_or(file_pid)) {
            continue;
        }
        let updated_ms = (file.status_updated_at.or(file.updated_at)).and_then(|v| v.as_i64());
        let inbox = RegistryFile::text(&file.messaging_socket_path).map(|socket| Inbox {
            socket: PathBuf::from(socket),
            token: None,
            pid: Some(file_pid),
            thread: None,
        });
        let reading = RegistryReading {
            status,
            updated_ms,
            inbox,
        };
        let newer = found
            .get(&file.session_id)
            .is_none_or(|old| reading.updated_ms > old.updated_ms);
        if newer {
            found.insert(file.session_id, reading);
        }
    }
    Ok(found)
}

/// The inbox `<dir>`'s live entry for `session_id` names: the second source, after the hooks,
/// for sessions whose hooks are not wired. The registry has no token; none is needed on Unix.
pub fn inbox_of(dir: &Path, session_id: &str) -> Option<Inbox> {
    let (pid, file) = live_entry(dir, session_id)?;
    Some(Inbox {
        socket: PathBuf::from(RegistryFile::text(&file.messaging_socket_path)?),
        token: None,
        pid: Some(pid),
        thread: None,
    })
}

/// What a live session's registry entry says about its inbox, for `doctor`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Announced {
    /// The Claude Code version running it, as written (`2.1.332`).
    pub version: Option<String>,
    /// `messagingSocketPath`: absent when the inbox is off or the version predates it.
    pub socket: Option<PathBuf>,
}

pub fn announced(dir: &Path, session_id: &str) -> Option<Announced> {
    let (_, file) = live_entry(dir, session_id)?;
    Some(Announced {
        version: RegistryFile::text(&file.version),
        socket: RegistryFile::text(&file.messaging_socket_path).map(PathBuf::from),
    })
}

/// The pid and contents of `<dir>/<pid>.json` for `session_id`, while that process is alive.
fn live_entry(dir: &Path, session_id: &str) -> Option<(u32, RegistryFile)> {
    files(std::fs::read_dir(dir).ok()?)
        .find(|(pid, file)| file.session_id == session_id && process_alive(*pid))
}

/// The session id in `<dir>/<pid>.json`, if that file is there and names a plausible one (the
/// launcher asks right after start-up, so only `sessionId` is needed).
pub fn session_of_pid(dir: &Path, pid: u32) -> Option<String> {
    let id = RegistryFile::read(&dir.join(format!("{pid}.json")))?.session_id;
    (is_valid_string(&id) && id.chars().count() <= MAX_SESSION_ID_CHARS).then_some(id)
}

/// Claude Code's registry in a config dir's `sessions/`, as the session loop asks it.
pub struct Registry {
    pub dir: PathBuf,
}

impl SessionList for Registry {
    fn read(&self) -> Result<HashMap<String, RegistryReading>, String> {
        read_registry(&self.dir).map_err(|e| e.to_string())
    }

    fn inbox_of(&self, sid: &str) -> Option<Inbox> {
        inbox_of(&self.dir, sid)
    }

    fn session_of_pid(&self, pid: u32) -> Option<String> {
        session_of_pid(&self.dir, pid)
    }
}

/// Whether a process with this pid exists (signal 0 checks without sending anything; EPERM
/// means it exists under another user).
pub(crate) fn process_alive(pid: u32) -> bool {
    let Ok(pid @ 1..) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reading::registry::RegistryStatus;

    #[test]
    fn reads_live_entries_and_skips_dead_foreign_and_key_files() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::process::id();
        let live = format!(
            r#"{{"pid":{me},"sessionId":"s-live","status":"waiting","waitingFor":"dialog open","statusUpdatedAt":1700000000000}}"#
        );
        std::fs::write(dir.path().join(format!("{me}.json")), live).unwrap();
        // A pid far above pid_max: no such process.
        std::fs::write(
            dir.path().join("999999999.json"),
            r#"{"pid":999999999,"sessionId":"s-dead","status":"idle"}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join(format!("{me}.abc.key")), "secret").unwrap();
        std::fs::write(dir.path().join("notes.json"), r#"{"sessionId":"x"}"#).unwrap();
        std::fs::write(dir.path().join("1.json"), "not json").unwrap();
        let found = read_registry(dir.path()).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found["s-live"].status, RegistryStatus::Waiting);
        assert_eq!(found["s-live"].updated_ms, Some(1_700_000_000_000));
    }

    #[test]
    fn a_live_entry_names_its_session_s_inbox() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::process::id();
        let entry = format!(
            r#"{{"pid":{me},"sessionId":"s-1","status":"idle","messagingSocketPath":"/run/cc-socks/{me}.sock"}}"#
        );
        std::fs::write(dir.path().join(format!("{me}.json")), entry).unwrap();
        std::fs::write(
            dir.path().join("999999999.json"),
            r#"{"sessionId":"s-dead","messagingSocketPath":"/run/cc-socks/1.sock"}"#,
        )
        .unwrap();
        let found = inbox_of(dir.path(), "s-1").unwrap();
        assert_eq!(
            found.socket,
            PathBuf::from(format!("/run/cc-socks/{me}.sock"))
        );
        assert_eq!(found.pid, Some(me));
        assert_eq!(inbox_of(dir.path(), "s-dead"), None, "its process is gone");
        assert_eq!(inbox_of(dir.path(), "s-2"), None);
        let told = announced(dir.path(), "s-1").unwrap();
        assert_eq!(told.socket, Some(found.socket));
        assert_eq!(told.version, None);
    }

    #[test]
    fn missing_directory_means_no_sessions() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            read_registry(&dir.path().join("absent"))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_pid_s_session_id_must_be_printable() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("1.json"),
            r#"{"pid":1,"sessionId":"ac3ea6be-3f07"}"#,
        )
        .unwrap();
        assert_eq!(
            session_of_pid(dir.path(), 1).as_deref(),
            Some("ac3ea6be-3f07")
        );
        std::fs::write(dir.path().join("2.json"), "{\"sessionId\":\"a\\u001bb\"}").unwrap();
        assert_eq!(session_of_pid(dir.path(), 2), None);
        assert_eq!(session_of_pid(dir.path(), 3), None);
    }

    #[test]
    fn oversized_files_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::process::id();
        let padding = " ".repeat(70 * 1024);
        std::fs::write(
            dir.path().join(format!("{me}.json")),
            format!(r#"{{"pid":{me},"sessionId":"s","status":"idle"}}{padding}"#),
        )
        .unwrap();
        assert!(read_registry(dir.path()).unwrap().is_empty());
    }
}
