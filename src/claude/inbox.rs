//! Claude Code's per-session inbox: a private Unix socket a session announces to its hooks. A
//! line written there starts a turn in an idle session, reaches a busy one between tool calls
//! and never touches a draft or a dialog. This module finds it, checks it is one to trust and
//! sends one message; whether it arrived is the session's `UserPromptSubmit` hook's to say, and
//! whether Claude Code held it for a human ([`held_since`]) its transcript's.

use std::io::ErrorKind;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;

use serde_json::json;
use tokio::io::AsyncWriteExt;

use super::registry::process_alive;
use crate::deadline::Deadline;
use crate::env::Env;
use crate::reading::inbox::{Inbox, InboxError};

pub const SOCKET_ENV: &str = "CLAUDE_CODE_MESSAGING_SOCKET";
pub const TOKEN_ENV: &str = "CLAUDE_CODE_MESSAGING_TOKEN";
pub const PID_ENV: &str = "CLAUDE_PID";

/// Longest message Claude Code reads (a line of at most 1 MiB); the envelope takes some of it.
pub const MAX_MESSAGE_BYTES: usize = 1024 * 1024 - 4096;

/// Longest token kept: Claude Code's are 32 hex digits.
const MAX_TOKEN_CHARS: usize = 128;

/// The inbox a hook's environment announces, if any.
pub fn from_hook_env(env: &Env) -> Option<Inbox> {
    let socket = env.absolute_path(SOCKET_ENV)?;
    let token = env
        .nonempty(TOKEN_ENV)
        .filter(|t| t.len() <= MAX_TOKEN_CHARS && t.chars().all(|c| c.is_ascii_hexdigit()));
    let pid = env.nonempty(PID_ENV).and_then(|p| p.parse().ok());
    Some(Inbox {
        socket,
        token,
        pid,
        thread: None,
    })
}

/// Whether this is Claude Code's socket to send to: a socket (no symlink) owned by this user,
/// in a directory no one else can enter, its process (when known) alive.
pub fn check(inbox: &Inbox) -> Result<(), InboxError> {
    let path = &inbox.socket;
    let meta = std::fs::symlink_metadata(path).map_err(|e| match e.kind() {
        ErrorKind::NotFound => InboxError::Gone(path.clone()),
        _ => io_error(path, &e),
    })?;
    if meta.file_type().is_symlink() {
        return Err(InboxError::Symlink(path.clone()));
    }
    if !meta.file_type().is_socket() {
        return Err(InboxError::NotASocket(path.clone()));
    }
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    if meta.uid() != uid {
        return Err(InboxError::NotOurs(path.clone()));
    }
    let dir = path.parent().unwrap_or(Path::new("/"));
    let dir_meta = std::fs::symlink_metadata(dir).map_err(|e| io_error(dir, &e))?;
    if dir_meta.uid() != uid || dir_meta.permissions().mode() & 0o077 != 0 {
        return Err(InboxError::OpenDirectory(path.clone()));
    }
    if let Some(pid) = inbox.pid
        && !process_alive(pid)
    {
        return Err(InboxError::DeadProcess(pid));
    }
    Ok(())
}

/// Sends `text` as one message and waits until the session closed the connection, which it
/// does once it read the lines.
pub async fn send(inbox: &Inbox, text: &str, deadline: Deadline) -> Result<(), InboxError> {
    if text.len() > MAX_MESSAGE_BYTES {
        return Err(InboxError::TooLong(text.len()));
    }
    check(inbox)?;
    let path = &inbox.socket;
    let auth = (inbox.token.as_ref()).map(|token| json!({"type": "auth", "token": token}));
    let message = json!({"type": "user", "message": {"role": "user", "content": text}});
    let lines: String = auth
        .into_iter()
        .chain([message])
        .map(|v| format!("{v}\n"))
        .collect();
    let write = async {
        let mut stream =
            tokio::net::UnixStream::connect(path)
                .await
                .map_err(|e| match e.kind() {
                    ErrorKind::ConnectionRefused => InboxError::Refused(path.clone()),
                    ErrorKind::NotFound => InboxError::Gone(path.clone()),
                    _ => io_error(path, &e),
                })?;
        stream
            .write_all(lines.as_bytes())
            .await
            .map_err(|e| io_error(path, &e))?;
        // Every byte is written: a session that already closed its side (shutdown fails
        // with ENOTCONN on some systems) has read the message.
        if let Err(e) = stream.shutdown().await {
            tracing::debug!(socket = %path.display(), error = %e, "inbox shutdown after the message");
        }
        Ok(stream)
    };
    let timed = tokio::time::timeout(deadline.remaining(), write).await;
    let mut stream = timed.unwrap_or_else(|_| Err(InboxError::Timeout(path.clone())))?;
    // Every byte is in the connection now, and the session reads it whenever it gets to it:
    // a session slow to close its side has the message, and typing it too would tell it
    // twice. The wait only lets a prompt session answer within the budget.
    let mut sink = tokio::io::sink();
    let closed = tokio::io::copy(&mut stream, &mut sink);
    if tokio::time::timeout(deadline.remaining(), closed)
        .await
        .is_err()
    {
        tracing::debug!(socket = %path.display(), "inbox written; the session had not closed it yet");
    }
    Ok(())
}

/// How much of a transcript's end is read for a held message: the notice is written at once.
pub const HELD_TAIL_BYTES: u64 = 256 * 1024;

/// Whether `tail` (a transcript's last lines) has Claude Code's notice of a message held for a
/// human at or after `since_ms`: a session in bypass mode holds a sender's message that does not
/// state its permission mode, unless `crossSessionInbound` is `accept`. The notice is a `system`
/// record (`Held peer message — … not delivered to Claude`); Deny removes it, Deliver releases
/// the message and its `UserPromptSubmit` hook fires.
pub fn held_since(tail: &str, since_ms: i64) -> bool {
    tail.lines()
        .filter(|line| line.contains(HELD_NOTICE))
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|record| record["type"] == "system")
        .filter(|record| (record["content"].as_str()).is_some_and(|c| c.starts_with(HELD_NOTICE)))
        .filter_map(|record| {
            record["timestamp"]
                .as_str()?
                .parse::<jiff::Timestamp>()
                .ok()
        })
        .any(|at| at.as_millisecond() >= since_ms)
}

const HELD_NOTICE: &str = "Held peer message";

/// Whether Claude Code holds for a human the message sent at `unanswered_since` that nothing
/// answered yet: [`held_since`] over the last [`HELD_TAIL_BYTES`] of the session's transcript.
pub fn held(unanswered_since: Option<i64>, transcript: Option<&Path>) -> bool {
    let (Some(since), Some(path)) = (unanswered_since, transcript) else {
        return false;
    };
    let read = crate::private_fs::open_read(path)
        .and_then(|f| crate::reading::transcript::tail(f, HELD_TAIL_BYTES));
    held_since(&String::from_utf8_lossy(&read.unwrap_or_default()), since)
}

fn io_error(path: &Path, error: &std::io::Error) -> InboxError {
    InboxError::Io {
        path: path.to_path_buf(),
        error: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::path::PathBuf;
    use std::time::Duration;
    use tokio::io::AsyncReadExt;

    fn private_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        dir
    }

    fn inbox(socket: PathBuf) -> Inbox {
        Inbox {
            socket,
            token: Some("0123abcd".into()),
            pid: Some(std::process::id()),
            thread: None,
        }
    }

    #[test]
    fn the_hook_environment_announces_it_and_a_bad_token_is_left_out() {
        let env = Env::from_pairs([
            (SOCKET_ENV, "/tmp/cc-socks/42.sock"),
            (TOKEN_ENV, "bd13574ef53ebc45f34cc69e0b0e6261"),
            (PID_ENV, "42"),
        ]);
        let found = from_hook_env(&env).unwrap();
        assert_eq!(found.socket, PathBuf::from("/tmp/cc-socks/42.sock"));
        assert_eq!(found.pid, Some(42));
        assert!(found.token.is_some());
        assert!(
            !format!("{found:?}").contains("bd1357"),
            "the token is never shown"
        );
        let odd = env
            .with(TOKEN_ENV, "not hex; rm -rf")
            .with(SOCKET_ENV, "relative.sock");
        assert_eq!(from_hook_env(&odd), None, "a relative path is no inbox");
        let odd = odd.with(SOCKET_ENV, "/s.sock");
        assert_eq!(from_hook_env(&odd).unwrap().token, None);
    }

    #[tokio::test]
    async fn a_message_is_written_as_two_lines_and_taken_when_the_session_closes() {
        let dir = private_dir();
        let path = dir.path().join("1.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut got = String::new();
            stream.read_to_string(&mut got).await.unwrap();
            got
        });
        send(
            &inbox(path),
            "Wake up.",
            Deadline::after(Duration::from_secs(5)),
        )
        .await
        .unwrap();
        let got = server.await.unwrap();
        let lines: Vec<serde_json::Value> = got
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0], json!({"type": "auth", "token": "0123abcd"}));
        assert_eq!(lines[1]["type"], "user");
        assert_eq!(lines[1]["message"]["content"], "Wake up.");
    }

    #[tokio::test]
    async fn every_failure_is_an_answer_within_the_budget() {
        let dir = private_dir();
        // Gone; a file that is no socket; a symlink to a socket; a socket nobody accepts on
        // within the budget (bound, listening, never read: the connection waits).
        let gone = dir.path().join("gone.sock");
        assert!(matches!(
            send(&inbox(gone), "x", Deadline::after(Duration::from_secs(1))).await,
            Err(InboxError::Gone(_))
        ));
        let file = dir.path().join("file.sock");
        std::fs::write(&file, "").unwrap();
        assert!(matches!(
            check(&inbox(file)),
            Err(InboxError::NotASocket(_))
        ));
        let real = dir.path().join("real.sock");
        let _listener = tokio::net::UnixListener::bind(&real).unwrap();
        let link = dir.path().join("link.sock");
        symlink(&real, &link).unwrap();
        assert!(matches!(check(&inbox(link)), Err(InboxError::Symlink(_))));
        // Listening, never reading: a short message is the session's once written (it reads it
        // whenever it gets to it); one the connection cannot take whole is a timeout.
        let started = std::time::Instant::now();
        let slow = send(
            &inbox(real.clone()),
            "x",
            Deadline::after(Duration::from_millis(300)),
        )
        .await;
        assert_eq!(slow, Ok(()));
        let big = "x".repeat(MAX_MESSAGE_BYTES);
        let stuck = send(
            &inbox(real.clone()),
            &big,
            Deadline::after(Duration::from_millis(300)),
        )
        .await;
        assert!(matches!(stuck, Err(InboxError::Timeout(_))), "{stuck:?}");
        assert!(started.elapsed() < Duration::from_secs(2));
        let dead = Inbox {
            pid: Some(i32::MAX as u32),
            ..inbox(real)
        };
        assert!(matches!(check(&dead), Err(InboxError::DeadProcess(_))));
        let long = "x".repeat(MAX_MESSAGE_BYTES + 1);
        assert!(matches!(
            send(
                &inbox(dir.path().join("any.sock")),
                &long,
                Deadline::after(Duration::from_secs(1))
            )
            .await,
            Err(InboxError::TooLong(_))
        ));
    }

    #[test]
    fn a_held_notice_after_the_send_says_held() {
        let notice = r#"{"type":"system","subtype":"informational","content":"Held peer message — from an unidentified session [verified pid 1]; not delivered to Claude (1 held).","timestamp":"2026-12-02T23:28:20.559Z","level":"warning"}"#;
        let at = "2026-12-02T23:28:20.559Z"
            .parse::<jiff::Timestamp>()
            .unwrap()
            .as_millisecond();
        let tail = format!("{{\"type\":\"mode\"}}\n{notice}\n");
        assert!(held_since(&tail, at));
        assert!(held_since(&tail, at - 5_000));
        assert!(!held_since(&tail, at + 1), "held before this send");
        let quoted = r#"{"type":"user","message":{"content":"Held peer message"},"timestamp":"2026-12-02T23:28:21Z"}"#;
        assert!(!held_since(quoted, at), "only Claude Code's own notice");
        assert!(!held_since("not json Held peer message", at));
    }

    #[tokio::test]
    async fn another_users_socket_is_not_used() {
        // Only root can hand a socket to another user; elsewhere the check is the same code.
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return;
        }
        let dir = private_dir();
        let path = dir.path().join("1.sock");
        let _listener = tokio::net::UnixListener::bind(&path).unwrap();
        std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
        assert!(matches!(check(&inbox(path)), Err(InboxError::NotOurs(_))));
    }

    #[tokio::test]
    async fn a_socket_in_a_directory_others_can_enter_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.path().join("1.sock");
        let _listener = tokio::net::UnixListener::bind(&path).unwrap();
        assert!(matches!(
            check(&inbox(path)),
            Err(InboxError::OpenDirectory(_))
        ));
    }
}
