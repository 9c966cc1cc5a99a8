//! A shared secret read from a file: the webhook's (`[bridge] secret_file`) or the fleet's key
//! (`[fleet] key_file`). The user's alone, a regular file, not empty, or refused with the fix (a
//! secret others can read is none; an empty one would turn signature checks off).
//! `AGENT_EVENT_BUS_BRIDGE_SECRET` wins over the webhook's file.

use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::wire::signature::Secret;

/// Group and others' bits, which must be clear.
const SHARED_BITS: u32 = 0o077;

/// Longest secret file read: a shared HMAC secret is tens of bytes; a bigger file is not one.
const MAX_SECRET_BYTES: u64 = 4096;

/// Which secret a file holds: its setting, that setting's variable, and what goes in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SecretOf {
    pub setting: &'static str,
    pub var: &'static str,
    pub holds: &'static str,
}

pub const WEBHOOK_SECRET: SecretOf = SecretOf {
    setting: "bridge.secret_file",
    var: "WAKEBRIDGE_BRIDGE__SECRET_FILE",
    holds: "the webhook's shared secret",
};

#[derive(Debug, thiserror::Error)]
pub enum SecretFileError {
    #[error(
        "secret file {} ({} / {}): {source}; create it with {} and `chmod 600` it, or unset the \
         setting",
        path.display(), of.setting, of.var, of.holds
    )]
    Open {
        path: PathBuf,
        of: SecretOf,
        source: std::io::Error,
    },
    #[error(
        "secret file {} is readable by others (mode {mode:03o}): run `chmod 600 {}` ({} / {})",
        path.display(), path.display(), of.setting, of.var
    )]
    Shared {
        path: PathBuf,
        of: SecretOf,
        mode: u32,
    },
    #[error(
        "secret file {} is not a regular file: point {} / {} at a file holding {} (chmod 600)",
        path.display(), of.setting, of.var, of.holds
    )]
    NotAFile { path: PathBuf, of: SecretOf },
    #[error(
        "secret file {} is empty: write {} into it (one line, chmod 600), or unset {} / {}",
        path.display(), of.holds, of.setting, of.var
    )]
    Empty { path: PathBuf, of: SecretOf },
    #[error(
        "secret file {} is larger than {MAX_SECRET_BYTES} bytes or not text: it should hold only \
         {}, on one line",
        path.display(), of.holds
    )]
    NotASecret { path: PathBuf, of: SecretOf },
}

/// The file's text without its trailing line ending.
pub fn read(path: &Path, of: SecretOf) -> Result<Secret, SecretFileError> {
    let open_error = |source| SecretFileError::Open {
        path: path.to_path_buf(),
        of,
        source,
    };
    // O_NONBLOCK: a FIFO planted at the path must not hang the start; it is refused below.
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(open_error)?;
    // The mode of what was opened, not of the path, so a swap after the check changes nothing.
    let meta = file.metadata().map_err(open_error)?;
    if !meta.is_file() {
        return Err(SecretFileError::NotAFile {
            path: path.to_path_buf(),
            of,
        });
    }
    let mode = meta.mode() & 0o777;
    if mode & SHARED_BITS != 0 {
        return Err(SecretFileError::Shared {
            path: path.to_path_buf(),
            of,
            mode,
        });
    }
    let mut text = String::new();
    let read = (&mut file)
        .take(MAX_SECRET_BYTES + 1)
        .read_to_string(&mut text);
    match read {
        Ok(n) if (n as u64) <= MAX_SECRET_BYTES => {}
        Err(e) if e.kind() != std::io::ErrorKind::InvalidData => return Err(open_error(e)),
        // Too long, or not text.
        _ => {
            return Err(SecretFileError::NotASecret {
                path: path.to_path_buf(),
                of,
            });
        }
    }
    let secret = text.trim_end_matches(['\n', '\r']);
    if secret.trim().is_empty() {
        return Err(SecretFileError::Empty {
            path: path.to_path_buf(),
            of,
        });
    }
    Ok(Secret::new(secret))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::Permissions;
    use std::os::unix::fs::PermissionsExt;

    fn file(dir: &Path, text: &str, mode: u32) -> PathBuf {
        let path = dir.join("secret");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn a_private_file_gives_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = file(dir.path(), "s3cret\n", 0o600);
        assert_eq!(read(&path, WEBHOOK_SECRET).unwrap().expose(), "s3cret");
        let path = file(dir.path(), "with inner space\r\n", 0o400);
        assert_eq!(
            read(&path, WEBHOOK_SECRET).unwrap().expose(),
            "with inner space"
        );
    }

    #[test]
    fn shared_missing_empty_and_odd_files_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = file(dir.path(), "s3cret\n", 0o644);
        let e = read(&path, WEBHOOK_SECRET).unwrap_err().to_string();
        assert!(
            e.contains("chmod 600") && e.contains(&path.display().to_string()),
            "{e}"
        );
        assert!(e.contains("644"), "{e}");
        let path = file(dir.path(), "s3cret", 0o660);
        assert!(matches!(
            read(&path, WEBHOOK_SECRET),
            Err(SecretFileError::Shared { .. })
        ));
        let path = file(dir.path(), "\n", 0o600);
        let e = read(&path, WEBHOOK_SECRET).unwrap_err();
        assert!(matches!(e, SecretFileError::Empty { .. }), "{e}");
        let missing = dir.path().join("none");
        let e = read(&missing, WEBHOOK_SECRET).unwrap_err().to_string();
        assert!(e.contains("none") && e.contains("chmod 600"), "{e}");
        assert!(matches!(
            read(dir.path(), WEBHOOK_SECRET),
            Err(SecretFileError::NotAFile { .. })
        ));
        let path = file(dir.path(), &"x".repeat(5000), 0o600);
        assert!(matches!(
            read(&path, WEBHOOK_SECRET),
            Err(SecretFileError::NotASecret { .. })
        ));
    }
}
