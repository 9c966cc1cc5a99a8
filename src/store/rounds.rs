//! The spool's write-ahead rounds in the ledger: each round's bytes per session and its delivery
//! rows, committed durably before the bytes reach a file, forgotten once the files are synced
//! (or taken back when a write was refused). The spool owns the files and when to call these.

use rusqlite::{Connection, OptionalExtension, params};

use super::records::{Delivery, exec, insert_delivery, note_latest};
use super::writer::Applied;
use super::{Store, StoreError};

impl Store {
    /// Commits a spool round's record, synced, and returns its row ids (blocking).
    pub fn commit_round(&self, round: SpoolRound) -> Result<Vec<RoundIds>, StoreError> {
        let op = Box::new(move |conn: &Connection| apply_round(conn, &round).map(Applied::Round));
        match self.submit_blocking(true, op)? {
            Applied::Round(ids) => Ok(ids),
            Applied::Rows(_) => Ok(Vec::new()),
        }
    }

    /// Forgets `wake_dir`'s pending bytes up to row `upto`, their files synced (blocking).
    pub fn spool_synced(&self, wake_dir: &str, upto: i64) -> Result<u64, StoreError> {
        let wake_dir = wake_dir.to_owned();
        let op = move |conn: &Connection| {
            let sql = "DELETE FROM spool_pending WHERE wake_dir = ?1 AND id <= ?2";
            exec(conn, sql, params![wake_dir, upto]).map(|deleted| Applied::Rows(deleted as u64))
        };
        self.submit_blocking(false, Box::new(op)).map(Applied::rows)
    }

    /// Takes back a session's share of a round whose bytes could not be written (blocking).
    pub fn forget_share(&self, session_id: &str, ids: RoundIds) -> Result<u64, StoreError> {
        let session_id = session_id.to_owned();
        let op = move |conn: &Connection| forget_share(conn, &session_id, &ids).map(Applied::Rows);
        self.submit_blocking(false, Box::new(op)).map(Applied::rows)
    }

    /// `wake_dir`'s pending spool bytes (files not known synced), oldest first, with row ids.
    pub fn pending_spool(&self, wake_dir: &str) -> Result<Vec<(i64, PendingBytes)>, StoreError> {
        self.read(|conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT id, shares, bytes FROM spool_pending WHERE wake_dir = ?1 ORDER BY id",
            )?;
            let rows = stmt.query_map(params![wake_dir], |row| {
                let (id, shares, bytes): (i64, String, Vec<u8>) =
                    (row.get(0)?, row.get(1)?, row.get(2)?);
                Ok(unpack_round(&shares, &bytes)
                    .into_iter()
                    .map(move |share| (id, share)))
            })?;
            let rows = rows.collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows.into_iter().flatten().collect())
        })
    }
}

/// One session's share of a spool round: whole lines at `offset` in the file `inode`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingBytes {
    pub session_id: String,
    pub inode: u64,
    pub offset: u64,
    pub bytes: Vec<u8>,
}

/// The write-ahead record of a spool round: each session's bytes and its lines' delivery rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpoolRound {
    /// The wake dir, canonical: the key a restart replays by.
    pub wake_dir: String,
    pub sessions: Vec<(PendingBytes, Vec<Delivery>)>,
}

/// A committed round's row ids for one session: the pending row and its deliveries in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundIds {
    pub pending: i64,
    pub deliveries: Vec<i64>,
}

/// A pending row's share: session, inode, file offset, start and length in the row's `bytes`.
type Share = (String, u64, u64, usize, usize);

/// Writes a spool round's record: one pending row (one insert) holds every session's bytes.
fn apply_round(conn: &Connection, round: &SpoolRound) -> rusqlite::Result<Vec<RoundIds>> {
    let mut shares: Vec<Share> = Vec::with_capacity(round.sessions.len());
    let mut bytes = Vec::with_capacity(round.sessions.iter().map(|(p, _)| p.bytes.len()).sum());
    for (pending, _) in &round.sessions {
        shares.push((
            pending.session_id.clone(),
            pending.inode,
            pending.offset,
            bytes.len(),
            pending.bytes.len(),
        ));
        bytes.extend_from_slice(&pending.bytes);
    }
    let shares = serde_json::to_string(&shares)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(e.into()))?;
    let sql = "INSERT INTO spool_pending (wake_dir, shares, bytes) VALUES (?1, ?2, ?3)";
    exec(conn, sql, params![round.wake_dir, shares, bytes])?;
    let pending = conn.last_insert_rowid();
    let mut ids = Vec::with_capacity(round.sessions.len());
    for (_, rows) in &round.sessions {
        let deliveries: Vec<i64> = rows
            .iter()
            .map(|d| insert_delivery(conn, d))
            .collect::<rusqlite::Result<_>>()?;
        if let (Some(&id), Some(last)) = (deliveries.last(), rows.last()) {
            // A round's lines are the bus's events.
            note_latest(conn, &last.target_session, id, last.at_ms, true)?;
        }
        ids.push(RoundIds {
            pending,
            deliveries,
        });
    }
    Ok(ids)
}

fn unpack_round(shares: &str, bytes: &[u8]) -> Vec<PendingBytes> {
    let shares: Vec<Share> = serde_json::from_str(shares).unwrap_or_default();
    shares
        .into_iter()
        .filter_map(|(session_id, inode, offset, start, len)| {
            Some(PendingBytes {
                session_id,
                inode,
                offset,
                bytes: bytes.get(start..start.checked_add(len)?)?.to_vec(),
            })
        })
        .collect()
}

/// Takes back a session's refused share: a restart must not append it, and its identities must
/// not make a retry look like a redelivery.
fn forget_share(conn: &Connection, session_id: &str, ids: &RoundIds) -> rusqlite::Result<u64> {
    let shares: Option<String> = conn
        .prepare_cached("SELECT shares FROM spool_pending WHERE id = ?1")?
        .query_row(params![ids.pending], |row| row.get(0))
        .optional()?;
    let mut deleted = 0;
    if let Some(shares) = shares {
        let mut shares: Vec<Share> = serde_json::from_str(&shares).unwrap_or_default();
        shares.retain(|share| share.0 != session_id);
        if shares.is_empty() {
            let sql = "DELETE FROM spool_pending WHERE id = ?1";
            deleted += exec(conn, sql, params![ids.pending])?;
        } else {
            let shares = serde_json::to_string(&shares)
                .map_err(|e| rusqlite::Error::ToSqlConversionFailure(e.into()))?;
            let sql = "UPDATE spool_pending SET shares = ?2 WHERE id = ?1";
            exec(conn, sql, params![ids.pending, shares])?;
        }
    }
    for id in &ids.deliveries {
        deleted += exec(conn, "DELETE FROM deliveries WHERE id = ?1", params![id])?;
    }
    forget_latest_if_gone(conn, session_id)?;
    Ok(deleted as u64)
}

/// Drops `session_id` from `latest_deliveries` when the delivery it points to was deleted.
pub(super) fn forget_latest_if_gone(conn: &Connection, sid: &str) -> rusqlite::Result<usize> {
    exec(
        conn,
        "DELETE FROM latest_deliveries WHERE session_id = ?1 AND NOT EXISTS \
         (SELECT 1 FROM deliveries WHERE id = latest_deliveries.delivery_id)",
        params![sid],
    )
}
