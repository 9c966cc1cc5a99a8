//! Codex CLI's control socket: how a message reaches a Codex session without a keystroke. A
//! Codex TUI runs its threads in a background app-server shared by the user's TUIs, which listens
//! on `$CODEX_HOME/app-server-control/app-server-control.sock` (a symlink into the private
//! `/tmp/codex-daemon-<uid>/`): a WebSocket over a Unix socket, JSON-RPC in text frames without
//! the `"jsonrpc"` field. [`send`] asks whether the thread is open there (`thread/loaded/list`),
//! joins it (`thread/resume`) and starts a turn with the text (`turn/start`), which an idle TUI
//! shows and runs at once and a busy one folds into its running turn; the session's
//! `UserPromptSubmit` hook then reports the text like any prompt. A thread not open there (a
//! `codex exec`, a TUI gone) is not reached: resuming it would run a turn no one sees.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::home::CodexHome;
use crate::deadline::Deadline;

/// The control socket, under the Codex home.
pub const CONTROL_SOCKET: &str = "app-server-control/app-server-control.sock";

/// Largest answer frame read: `thread/resume` without its turns is a few kB.
const MAX_FRAME_BYTES: usize = 4 * 1024 * 1024;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ControlError {
    #[error("no Codex app-server listens at {0}: no Codex TUI runs, or it is gone")]
    Gone(PathBuf),
    #[error("{0} is not a socket of this user's in a directory only it can enter; not used")]
    Untrusted(PathBuf),
    #[error("thread {0} is not open in the Codex app-server (a `codex exec`, or its TUI is gone)")]
    NotOpen(String),
    #[error("the Codex app-server answered {method} with an error: {message}")]
    Answered {
        method: &'static str,
        message: String,
    },
    #[error("the Codex app-server did not answer within the budget")]
    Timeout,
    #[error("talking to the Codex app-server at {path} failed: {error}")]
    Io { path: PathBuf, error: String },
}

/// The control socket of the Codex home `home`.
pub fn socket_of(home: &CodexHome) -> PathBuf {
    home.dir.join(CONTROL_SOCKET)
}

/// The socket the control path names, checked: a symlink is expected (Codex makes one), its
/// target a socket owned by this user in a directory no one else can enter.
pub fn check(socket: &Path) -> Result<PathBuf, ControlError> {
    let target = std::fs::canonicalize(socket).map_err(|_| ControlError::Gone(socket.into()))?;
    let untrusted = || ControlError::Untrusted(target.clone());
    let meta = std::fs::metadata(&target).map_err(|_| ControlError::Gone(socket.into()))?;
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    if !meta.file_type().is_socket() || meta.uid() != uid {
        return Err(untrusted());
    }
    let dir = target.parent().unwrap_or(Path::new("/"));
    let dir_meta = std::fs::metadata(dir).map_err(|_| untrusted())?;
    if dir_meta.uid() != uid || dir_meta.permissions().mode() & 0o077 != 0 {
        return Err(untrusted());
    }
    Ok(target)
}

/// Starts a turn with `text` in `thread` through the control socket `socket`, within
/// `deadline`. `Ok` once the app-server accepted the turn.
pub async fn send(
    socket: &Path,
    thread: &str,
    text: &str,
    deadline: Deadline,
) -> Result<(), ControlError> {
    let target = check(socket)?;
    let talk = async {
        let stream = tokio::net::UnixStream::connect(&target)
            .await
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound => {
                    ControlError::Gone(socket.into())
                }
                _ => io_error(socket, &e),
            })?;
        // The socket checked by path may have been swapped since: its peer must be us.
        // SAFETY: getuid has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        let peer = stream.peer_cred().map_err(|e| io_error(socket, &e))?;
        if peer.uid() != uid {
            return Err(ControlError::Untrusted(target.clone()));
        }
        let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
            .max_message_size(Some(MAX_FRAME_BYTES))
            .max_frame_size(Some(MAX_FRAME_BYTES));
        let (ws, _) =
            tokio_tungstenite::client_async_with_config("ws://localhost/", stream, Some(config))
                .await
                .map_err(|e| io_error(socket, &e))?;
        let mut rpc = Rpc {
            ws,
            next: 0,
            socket,
        };
        let version = env!("CARGO_PKG_VERSION");
        rpc.call(
            "initialize",
            json!({"clientInfo": {"name": "wakebridge", "version": version},
                   "capabilities": {"experimentalApi": true}}),
        )
        .await?;
        rpc.notify("initialized").await?;
        let loaded = rpc.call("thread/loaded/list", json!({})).await?;
        let open = loaded["data"].as_array().into_iter().flatten();
        if !open.clone().any(|id| id == thread) {
            return Err(ControlError::NotOpen(thread.to_owned()));
        }
        let params = json!({"threadId": thread, "excludeTurns": true});
        rpc.call("thread/resume", params).await?;
        let input = json!([{"type": "text", "text": text, "text_elements": []}]);
        rpc.call("turn/start", json!({"threadId": thread, "input": input}))
            .await?;
        let _ = rpc.ws.close(None).await;
        Ok(())
    };
    tokio::time::timeout(deadline.remaining(), talk)
        .await
        .unwrap_or(Err(ControlError::Timeout))
}

struct Rpc<'a, S> {
    ws: tokio_tungstenite::WebSocketStream<S>,
    next: u64,
    socket: &'a Path,
}

impl<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin> Rpc<'_, S> {
    async fn notify(&mut self, method: &str) -> Result<(), ControlError> {
        let frame = json!({"method": method}).to_string();
        let sent = self.ws.send(Message::text(frame)).await;
        sent.map_err(|e| io_error(self.socket, &e))
    }

    /// Sends one request and reads frames until its answer; notifications and the server's own
    /// requests in between are not ours.
    async fn call(&mut self, method: &'static str, params: Value) -> Result<Value, ControlError> {
        self.next += 1;
        let id = self.next;
        let frame = json!({"id": id, "method": method, "params": params}).to_string();
        let sent = self.ws.send(Message::text(frame)).await;
        sent.map_err(|e| io_error(self.socket, &e))?;
        while let Some(frame) = self.ws.next().await {
            let frame = frame.map_err(|e| io_error(self.socket, &e))?;
            let Message::Text(text) = frame else {
                continue;
            };
            let Ok(answer) = serde_json::from_str::<Value>(&text) else {
                continue;
            };
            if answer["id"] != id || answer.get("method").is_some() {
                continue;
            }
            if let Some(error) = answer.get("error") {
                let message = error["message"].as_str().unwrap_or("no message").to_owned();
                return Err(ControlError::Answered { method, message });
            }
            return Ok(answer["result"].clone());
        }
        Err(io_error(self.socket, &"the connection closed"))
    }
}

fn io_error(path: &Path, error: &dyn std::fmt::Display) -> ControlError {
    ControlError::Io {
        path: path.to_path_buf(),
        error: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn only_a_private_socket_of_ours_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let private = dir.path().join("daemon");
        std::fs::create_dir(&private).unwrap();
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
        let target = private.join("abc");
        let _listener = std::os::unix::net::UnixListener::bind(&target).unwrap();
        let link = dir.path().join("control.sock");
        symlink(&target, &link).unwrap();
        assert_eq!(check(&link), Ok(target.canonicalize().unwrap()));
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(matches!(check(&link), Err(ControlError::Untrusted(_))));
        let file = private.join("file");
        std::fs::write(&file, "").unwrap();
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(matches!(check(&file), Err(ControlError::Untrusted(_))));
        let gone = dir.path().join("gone.sock");
        assert_eq!(check(&gone), Err(ControlError::Gone(gone.clone())));
    }
}
