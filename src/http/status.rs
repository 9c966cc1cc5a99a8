//! The sessions `GET /sessions` and `/metrics` serve: the session loop's views, with what runs
//! on between two of its ticks filled in as they are served (each spool's depth, each
//! cooldown). When the ledger moved since the loop last read it (a hook's report, a pause, a
//! delivery), the loop is asked to look again first, so a request sees what was committed
//! before it.

use std::path::Path;
use std::time::Duration;

use crate::api::SessionStatus;
use crate::http::AppState;
use crate::session::SessionViews;
use crate::session::task::{Version, covered};

/// Spools bigger than this are not read to count lines; the size alone is reported.
const COUNT_LINES_MAX_BYTES: u64 = 64 << 20;

/// Longest a request waits for the loop's look at a ledger that moved: a tick takes
/// milliseconds, unless it is typing into a pane (then the views it has are served).
const FRESH_WAIT: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpoolDetail {
    /// Size and line count (reads each spool).
    Lines,
    /// Size only, for `/metrics`: scraped often, it must not cost more as spools grow.
    Bytes,
}

fn spool_depth(wake_dir: &Path, sid: &str, detail: SpoolDetail) -> (Option<u64>, u64) {
    let path = crate::spool::spool_path(wake_dir, sid);
    let Ok(meta) = std::fs::symlink_metadata(&path) else {
        return (Some(0), 0);
    };
    if detail == SpoolDetail::Bytes || !meta.is_file() || meta.len() > COUNT_LINES_MAX_BYTES {
        return (None, meta.len());
    }
    let lines = std::fs::read(&path)
        .map(|b| b.iter().filter(|&&c| c == b'\n').count() as u64)
        .ok();
    (lines, meta.len())
}

/// The loop's views, looked at again first when the ledger moved since it read it.
pub async fn views(app: &AppState) -> SessionViews {
    let mut views = app.views.clone();
    let store = app.deliverer.store().clone();
    let wake_dir = app.deliverer.spool().wake_dir().to_owned();
    let now = tokio::task::spawn_blocking(move || Version::now(&store, &wake_dir));
    if let Ok(Some(now)) = now.await
        && !covered(views.borrow().version, &now)
    {
        app.sessions.look_again();
        let fresh = views.wait_for(|v| covered(v.version, &now));
        let _ = tokio::time::timeout(FRESH_WAIT, fresh).await;
    }
    views.borrow().clone()
}

/// Every session's view with its spool's depth and its cooldown as they are now (reads each
/// spool: call it off the async workers).
pub fn filled(app: &AppState, views: &SessionViews, detail: SpoolDetail) -> Vec<SessionStatus> {
    let wake_dir = app.deliverer.spool().wake_dir();
    let gate = app.deliverer.gate();
    (views.sessions.values())
        .map(|status| {
            let sid = status.session_id.as_str();
            let (spool_lines, spool_bytes) = spool_depth(wake_dir, sid, detail);
            SessionStatus {
                spool_lines,
                spool_bytes,
                cooldown_remaining_s: gate.cooldown_remaining(sid).as_secs_f64(),
                ..status.clone()
            }
        })
        .collect()
}
