//! Read-side queries of the ledger and the row types they return. Each function takes a plain
//! read connection; it does not own connections, pooling or any writes.

use std::collections::{BTreeMap, HashMap};

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::records::{LimitSource, NudgeState, Payment, PendingBytes};

/// The latest delivery of one event identity inside the look-back window, used to warm the
/// in-memory dedupe map at start-up so a redelivery after a restart gets the same answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenIdentity {
    pub identity: String,
    pub action: String,
    /// The target session of that delivery.
    pub session_id: String,
    /// When it was recorded (unix ms), so the caller can expire it at the end of its window.
    pub at_ms: i64,
    /// Set when that delivery failed; the caller decides whether a failure is worth repeating.
    pub error_kind: Option<String>,
}

/// Everything the ledger knows about one session, for `status` and the nudger.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionRow {
    pub session_id: String,
    /// From the hook CLI; all `None` when the hook never reported this session.
    pub cwd: Option<String>,
    pub transcript_path: Option<String>,
    pub pane: Option<String>,
    pub last_hook_event: Option<String>,
    pub first_seen_ms: Option<i64>,
    pub last_seen_ms: Option<i64>,
    /// The most recent delivery targeting this session (still inside the retention window).
    pub last_delivery_ms: Option<i64>,
    pub last_action: Option<String>,
    pub last_error_kind: Option<String>,
    /// The last successful wake (the cooldown's start).
    pub last_wake_ms: Option<i64>,
    /// The idle nudger's state, if it ever recorded any.
    pub nudge: Option<NudgeState>,
    /// Bus events whose wake is owed, if any.
    pub owed: Option<Owed>,
    /// How the session's owed wakes were paid so far, if ever.
    pub paid: Option<Paid>,
    /// The usage limit the session is held at, if any.
    pub limit: Option<Limit>,
}

/// A usage limit a session is held at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    pub kind: String,
    pub resets_text: Option<String>,
    pub resets_at_ms: Option<i64>,
    pub how: LimitSource,
    pub since_ms: i64,
    /// Resume messages typed for it so far, and when the last one was.
    pub tries: u32,
    pub last_try_ms: Option<i64>,
    pub gave_up: bool,
}

/// What a session is owed: events whose wake was not typed and submitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owed {
    pub events: u32,
    /// When the oldest of them arrived (unix ms).
    pub since_ms: i64,
}

/// How a session's owed wakes were paid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paid {
    pub last_ms: i64,
    pub last_how: Payment,
    pub last_events: u32,
    pub by_hook: u64,
    pub by_typing: u64,
}

impl SessionRow {
    /// True when the `wakebridge hook` CLI has reported this session.
    pub fn seen_by_hook(&self) -> bool {
        self.last_seen_ms.is_some()
    }
}

/// Every session id the ledger mentions, each with its hook facts, last delivery, last wake
/// and nudge state. `?1` restricts to one id (NULL means all).
const SESSIONS_SQL: &str = "\
WITH ids (session_id) AS (
    SELECT session_id FROM sessions
    UNION SELECT session_id FROM wakes
    UNION SELECT session_id FROM nudges
    UNION SELECT session_id FROM latest_deliveries
    UNION SELECT session_id FROM owed_payments
    UNION SELECT session_id FROM limits
)
SELECT ids.session_id, s.cwd, s.transcript_path, s.pane, s.last_hook_event,
       s.first_seen_ms, s.last_seen_ms, d.at_ms, d.action, d.error_kind, w.last_wake_ms,
       n.unanswered, n.last_nudge_ms, n.acknowledged,
       (SELECT count(*) FROM deliveries o WHERE o.target_session = ids.session_id AND o.owed = 1),
       (SELECT min(at_ms) FROM deliveries o WHERE o.target_session = ids.session_id AND o.owed = 1),
       p.last_paid_ms, p.last_how, p.last_events, p.by_hook, p.by_typing,
       m.kind, m.resets_text, m.resets_at_ms, m.seen_how, m.since_ms, m.tries, m.last_try_ms,
       m.gave_up
FROM ids
LEFT JOIN sessions s ON s.session_id = ids.session_id
LEFT JOIN wakes w ON w.session_id = ids.session_id
LEFT JOIN nudges n ON n.session_id = ids.session_id
LEFT JOIN latest_deliveries l ON l.session_id = ids.session_id
LEFT JOIN deliveries d ON d.id = l.delivery_id
LEFT JOIN owed_payments p ON p.session_id = ids.session_id
LEFT JOIN limits m ON m.session_id = ids.session_id
WHERE ?1 IS NULL OR ids.session_id = ?1
ORDER BY ids.session_id";

fn session_row(row: &Row<'_>) -> rusqlite::Result<SessionRow> {
    let session_id: String = row.get(0)?;
    let unanswered: Option<u32> = row.get(11)?;
    let nudge = match unanswered {
        Some(unanswered) => Some(NudgeState {
            session_id: session_id.clone(),
            unanswered,
            last_nudge_ms: row.get(12)?,
            acknowledged: row.get(13)?,
        }),
        None => None,
    };
    let owed = match (row.get::<_, u32>(14)?, row.get::<_, Option<i64>>(15)?) {
        (events @ 1.., Some(since_ms)) => Some(Owed { events, since_ms }),
        _ => None,
    };
    let paid = match row.get::<_, Option<i64>>(16)? {
        Some(last_ms) => Some(Paid {
            last_ms,
            last_how: match row.get::<_, String>(17)?.as_str() {
                "hook" => Payment::Hook,
                _ => Payment::Typed,
            },
            last_events: row.get(18)?,
            by_hook: row.get(19)?,
            by_typing: row.get(20)?,
        }),
        None => None,
    };
    let limit = match row.get::<_, Option<String>>(21)? {
        Some(_) => Some(limit_at(row, 21)?),
        None => None,
    };
    Ok(SessionRow {
        session_id,
        cwd: row.get(1)?,
        transcript_path: row.get(2)?,
        pane: row.get(3)?,
        last_hook_event: row.get(4)?,
        first_seen_ms: row.get(5)?,
        last_seen_ms: row.get(6)?,
        last_delivery_ms: row.get(7)?,
        last_action: row.get(8)?,
        last_error_kind: row.get(9)?,
        last_wake_ms: row.get(10)?,
        nudge,
        owed,
        paid,
        limit,
    })
}

pub(crate) fn limit(conn: &Connection, session_id: &str) -> rusqlite::Result<Option<Limit>> {
    conn.prepare_cached(
        "SELECT kind, resets_text, resets_at_ms, seen_how, since_ms, tries, last_try_ms, gave_up \
         FROM limits WHERE session_id = ?1",
    )?
    .query_row(params![session_id], |row| limit_at(row, 0))
    .optional()
}

/// A `Limit` from the `limits` columns (kind, resets_text, resets_at_ms, seen_how, since_ms,
/// tries, last_try_ms, gave_up) starting at column `at`.
fn limit_at(row: &Row<'_>, at: usize) -> rusqlite::Result<Limit> {
    Ok(Limit {
        kind: row.get(at)?,
        resets_text: row.get(at + 1)?,
        resets_at_ms: row.get(at + 2)?,
        how: LimitSource::parse(&row.get::<_, String>(at + 3)?),
        since_ms: row.get(at + 4)?,
        tries: row.get(at + 5)?,
        last_try_ms: row.get(at + 6)?,
        gave_up: row.get(at + 7)?,
    })
}

pub(crate) fn sessions(conn: &Connection) -> rusqlite::Result<Vec<SessionRow>> {
    let mut stmt = conn.prepare_cached(SESSIONS_SQL)?;
    let rows = stmt.query_map(params![Option::<String>::None], session_row)?;
    rows.collect()
}

pub(crate) fn session(conn: &Connection, session_id: &str) -> rusqlite::Result<Option<SessionRow>> {
    conn.prepare_cached(SESSIONS_SQL)?
        .query_row(params![session_id], session_row)
        .optional()
}

pub(crate) fn known_session(conn: &Connection, session_id: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM sessions WHERE session_id = ?1)")?
        .query_row(params![session_id], |row| row.get(0))
}

pub(crate) fn identities_since(
    conn: &Connection,
    since_ms: i64,
    limit: usize,
) -> rusqlite::Result<Vec<SeenIdentity>> {
    // Newest first along the time index, stopping at `limit` rows: start-up cost is bounded by
    // what the dedupe memory can hold, however busy the window was. Only the newest row of each
    // identity is kept.
    let mut stmt = conn.prepare_cached(
        "SELECT identity, action, target_session, at_ms, error_kind FROM deliveries \
         WHERE at_ms >= ?1 AND identity IS NOT NULL ORDER BY at_ms DESC, id DESC LIMIT ?2",
    )?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = stmt.query_map(params![since_ms, limit], |row| {
        Ok(SeenIdentity {
            identity: row.get(0)?,
            action: row.get(1)?,
            session_id: row.get(2)?,
            at_ms: row.get(3)?,
            error_kind: row.get(4)?,
        })
    })?;
    let mut seen = std::collections::HashSet::new();
    let mut newest = Vec::new();
    for row in rows {
        let row = row?;
        if seen.insert(row.identity.clone()) {
            newest.push(row);
        }
    }
    Ok(newest)
}

pub(crate) fn last_wakes(conn: &Connection) -> rusqlite::Result<HashMap<String, i64>> {
    let mut stmt = conn.prepare_cached("SELECT session_id, last_wake_ms FROM wakes")?;
    let rows = stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    rows.collect()
}

pub(crate) fn nudge_state(
    conn: &Connection,
    session_id: &str,
) -> rusqlite::Result<Option<NudgeState>> {
    conn.prepare_cached(
        "SELECT session_id, unanswered, last_nudge_ms, acknowledged FROM nudges \
         WHERE session_id = ?1",
    )?
    .query_row(params![session_id], |row| {
        Ok(NudgeState {
            session_id: row.get(0)?,
            unanswered: row.get(1)?,
            last_nudge_ms: row.get(2)?,
            acknowledged: row.get(3)?,
        })
    })
    .optional()
}

pub(crate) fn delivery_counts_by_action(
    conn: &Connection,
) -> rusqlite::Result<BTreeMap<String, u64>> {
    let mut stmt =
        conn.prepare_cached("SELECT action, count(*) FROM deliveries GROUP BY action")?;
    let rows = stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    rows.collect()
}

pub(crate) fn pending_spool(
    conn: &Connection,
    wake_dir: &str,
) -> rusqlite::Result<Vec<(i64, PendingBytes)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, shares, bytes FROM spool_pending WHERE wake_dir = ?1 ORDER BY id",
    )?;
    let rows = stmt.query_map(params![wake_dir], |row| {
        let id: i64 = row.get(0)?;
        let shares: String = row.get(1)?;
        let bytes: Vec<u8> = row.get(2)?;
        Ok((id, super::records::unpack_round(&shares, &bytes)))
    })?;
    let mut pending = Vec::new();
    for row in rows {
        let (id, shares) = row?;
        pending.extend(shares.into_iter().map(|share| (id, share)));
    }
    Ok(pending)
}
