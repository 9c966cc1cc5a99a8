//! The rows that say how a session may be reached: where its inbox is, what was sent there and
//! heard, and a person's pause. Written by the daemon and the hook process alike, each column by
//! one of them, so neither undoes the other's write.

use rusqlite::{Connection, params};

use super::{ALL_SESSIONS, Record};

pub(super) fn apply(conn: &Connection, record: &Record) -> rusqlite::Result<()> {
    match record {
        Record::Paused {
            session_id,
            since_ms,
            until_ms,
        } => {
            conn.prepare_cached(
                "INSERT OR REPLACE INTO pauses (session_id, since_ms, until_ms) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![session_id, since_ms, until_ms])?;
        }
        Record::Unpaused { session_id } if session_id == ALL_SESSIONS => {
            conn.prepare_cached("DELETE FROM pauses")?.execute([])?;
        }
        Record::Unpaused { session_id } => {
            conn.prepare_cached("DELETE FROM pauses WHERE session_id = ?1")?
                .execute(params![session_id])?;
        }
        Record::InboxSeen {
            session_id,
            inbox,
            at_ms,
        } => {
            conn.prepare_cached(
                "INSERT INTO inboxes (session_id, socket, token, pid, seen_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (session_id) DO UPDATE SET \
                 socket = excluded.socket, token = excluded.token, pid = excluded.pid, \
                 seen_ms = excluded.seen_ms",
            )?
            .execute(params![
                session_id,
                inbox.socket.to_string_lossy(),
                inbox.token,
                inbox.pid,
                at_ms
            ])?;
        }
        Record::InboxSent {
            session_id,
            digest,
            at_ms,
        } => {
            conn.prepare_cached(
                "INSERT INTO inboxes (session_id, sent_digest, sent_ms) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (session_id) DO UPDATE SET sent_digest = excluded.sent_digest, \
                 sent_ms = excluded.sent_ms, sent_heard_ms = CASE \
                 WHEN heard_digest = excluded.sent_digest AND heard_ms >= excluded.sent_ms \
                 THEN heard_ms END",
            )?
            .execute(params![session_id, digest, at_ms])?;
        }
        Record::InboxHeard {
            session_id,
            digest,
            at_ms,
        } => {
            conn.prepare_cached(
                "INSERT INTO inboxes (session_id, heard_digest, heard_ms) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (session_id) DO UPDATE SET heard_digest = excluded.heard_digest, \
                 heard_ms = excluded.heard_ms, sent_heard_ms = CASE \
                 WHEN sent_digest = excluded.heard_digest AND excluded.heard_ms >= sent_ms \
                 THEN excluded.heard_ms ELSE sent_heard_ms END",
            )?
            .execute(params![session_id, digest, at_ms])?;
        }
        _ => {}
    }
    Ok(())
}
