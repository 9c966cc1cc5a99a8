//! Forgetting: deliveries past the identity window, and sessions with no trace left (or on an
//! operator's word) with every row naming them. When to run them is the daemon's choice.

use rusqlite::{Connection, params};

use super::queries::{MAX_RENAMES, successor};
use super::rounds::forget_latest_if_gone;
use super::{PRUNE_CHUNK_ROWS, Store, StoreError};

impl Store {
    /// Deletes deliveries before `cutoff_ms`, in chunks so the hot path is never held up long.
    pub async fn prune_older_than(&self, cutoff_ms: i64) -> Result<u64, StoreError> {
        let mut total = 0;
        loop {
            let chunk =
                move |conn: &Connection| prune_deliveries(conn, cutoff_ms, PRUNE_CHUNK_ROWS);
            let deleted = self.write_rows(chunk).await?;
            total += deleted;
            if deleted < u64::from(PRUNE_CHUNK_ROWS) {
                return Ok(total);
            }
        }
    }

    /// Forgets sessions with no trace since `cutoff_ms` that are not in `keep` (still mapped to a
    /// pane), so the tables do not grow with every session ever seen. Returns how many went.
    pub async fn forget_sessions_before(
        &self,
        cutoff_ms: i64,
        keep: Vec<String>,
    ) -> Result<u64, StoreError> {
        self.write_rows(move |conn| forget_sessions(conn, cutoff_ms, &keep))
            .await
    }

    /// Forgets `session_id` and its earlier ids whatever their age (`wakebridge forget`).
    pub async fn forget_session(&self, session_id: &str) -> Result<u64, StoreError> {
        let session_id = session_id.to_owned();
        self.write_rows(move |conn| forget_session(conn, &session_id))
            .await
    }
}

/// `dropped` without the ids given up at a `/clear` for a session that stays: the bus may still
/// use such an id, and its rename (and its rewinds) are how it reaches that session.
fn still_named(conn: &Connection, dropped: Vec<String>) -> rusqlite::Result<Vec<String>> {
    let mut named = Vec::new();
    for id in &dropped {
        // The id at the end of `id`'s renames (the one its session goes by now) stays.
        match successor(conn, id)? {
            Some((now, _)) if now != *id && !dropped.contains(&now) => {}
            _ => named.push(id.clone()),
        }
    }
    Ok(named)
}

/// Deletes up to `limit` deliveries older than `cutoff_ms`; returns how many. Owed events stay
/// until they are paid or their session is forgotten.
fn prune_deliveries(conn: &Connection, cutoff_ms: i64, limit: u32) -> rusqlite::Result<u64> {
    let targets: Vec<String> = conn
        .prepare_cached(
            "DELETE FROM deliveries WHERE id IN \
             (SELECT id FROM deliveries WHERE at_ms < ?1 AND owed = 0 ORDER BY at_ms LIMIT ?2) \
             RETURNING target_session",
        )?
        .query_map(params![cutoff_ms, limit], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    // A session whose latest delivery went has none left: forget its row (only those touched).
    for sid in targets.iter().collect::<std::collections::BTreeSet<_>>() {
        forget_latest_if_gone(conn, sid)?;
    }
    Ok(targets.len() as u64)
}

/// Forgets sessions whose every trace is older than `cutoff_ms`, except those in `keep`: their
/// per-session rows go and what they were owed is written off. Returns how many.
fn forget_sessions(conn: &Connection, cutoff_ms: i64, keep: &[String]) -> rusqlite::Result<u64> {
    let keep = serde_json::to_string(keep).unwrap_or_else(|_| "[]".into());
    let dropped: Vec<String> = {
        let mut stmt = conn.prepare_cached(
            "SELECT session_id FROM ( \
                 SELECT session_id, last_seen_ms AS at FROM sessions \
                 UNION ALL SELECT session_id, last_wake_ms FROM wakes \
                 UNION ALL SELECT session_id, coalesce(last_nudge_ms, 0) FROM nudges \
                 UNION ALL SELECT target_session, at_ms FROM deliveries WHERE owed = 1 \
                 UNION ALL SELECT session_id, max(since_ms, coalesce(last_try_ms, 0)) FROM limits \
                 UNION ALL SELECT session_id, coalesce(done_ms, asked_ms) FROM rewinds \
                 UNION ALL SELECT session_id, \
                     max(coalesce(seen_ms, 0), coalesce(sent_ms, 0), coalesce(heard_ms, 0)) \
                     FROM inboxes) \
             WHERE session_id NOT IN (SELECT value FROM json_each(?2)) \
             GROUP BY session_id HAVING max(at) < ?1",
        )?;
        let rows = stmt.query_map(params![cutoff_ms, keep], |row| row.get(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let dropped = still_named(conn, dropped)?;
    forget_ids(conn, &dropped)?;
    Ok(dropped.len() as u64)
}

/// The rows [`forget_sessions`] removes, for `session_id` and every id it had before a `/clear`
/// (one session to status), and its latest-delivery row, so it leaves `/sessions`. Its
/// deliveries stay until pruned: a redelivered event must still be known. Returns how many of
/// those ids the ledger knew; 0 means none.
fn forget_session(conn: &Connection, session_id: &str) -> rusqlite::Result<u64> {
    let renamed: Vec<_> = super::records::pairs(conn, "SELECT old_id, new_id FROM aliases", [])?;
    let ids = formerly_and_self(&renamed, session_id);
    let mut exists = conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM sessions WHERE session_id = ?1 \
                 UNION ALL SELECT 1 FROM wakes WHERE session_id = ?1 \
                 UNION ALL SELECT 1 FROM nudges WHERE session_id = ?1 \
                 UNION ALL SELECT 1 FROM latest_deliveries WHERE session_id = ?1 \
                 UNION ALL SELECT 1 FROM owed_payments WHERE session_id = ?1 \
                 UNION ALL SELECT 1 FROM limits WHERE session_id = ?1 \
                 UNION ALL SELECT 1 FROM rewinds WHERE session_id = ?1 \
                 UNION ALL SELECT 1 FROM inboxes WHERE session_id = ?1 \
                 UNION ALL SELECT 1 FROM pauses WHERE session_id = ?1 \
                 UNION ALL SELECT 1 FROM aliases WHERE old_id = ?1 OR new_id = ?1)",
    )?;
    let mut known = 0;
    for id in &ids {
        known += u64::from(exists.query_row(params![id], |row| row.get::<_, bool>(0))?);
    }
    forget_ids(conn, &ids)?;
    let mut stmt = conn.prepare_cached("DELETE FROM latest_deliveries WHERE session_id = ?1")?;
    for id in &ids {
        stmt.execute(params![id])?;
    }
    Ok(known)
}

/// `id` and every id whose renames (old → new, at each `/clear`) lead to it.
fn formerly_and_self(renamed: &[(String, String)], id: &str) -> Vec<String> {
    let mut ids = vec![id.to_owned()];
    let mut at = 0;
    // Bounded as `Store::successor` is: a loop in the table cannot hang the forget.
    while at < ids.len() && ids.len() < MAX_RENAMES {
        let current = ids[at].clone();
        for (old, new) in renamed {
            if *new == current && !ids.contains(old) {
                ids.push(old.clone());
            }
        }
        at += 1;
    }
    ids
}

/// Removes every per-session row naming one of `dropped` and writes off what they were owed.
fn forget_ids(conn: &Connection, dropped: &[String]) -> rusqlite::Result<()> {
    let mut statements = [
        "sessions",
        "wakes",
        "nudges",
        "owed_payments",
        "limits",
        "rewinds",
        "inboxes",
        "pauses",
        "claims",
    ]
    .map(|table| format!("DELETE FROM {table} WHERE session_id = ?1"))
    .to_vec();
    statements.push("UPDATE deliveries SET owed = 0 WHERE target_session = ?1 AND owed = 1".into());
    statements.push("DELETE FROM aliases WHERE old_id = ?1 OR new_id = ?1".into());
    for sql in statements {
        let mut stmt = conn.prepare_cached(&sql)?;
        for sid in dropped {
            stmt.execute(params![sid])?;
        }
    }
    Ok(())
}
