//! Read-side queries of the ledger, as `Store` methods on a pooled read-only connection, and
//! the row types they return. No writes.

use std::collections::HashMap;

use rusqlite::types::ValueRef;
use rusqlite::{OptionalExtension, Row, params};

use super::records::{LimitSource, NudgeState, Payment, RewindOutcome, RewindWhy, pairs};
use super::{Store, StoreError};
use crate::agent::Agent;
use crate::reading::inbox::Inbox;

/// One delivery of an event identity, as the start-up warm-up of the dedupe memory reads it
/// (borrowed from the row: the whole window is read, and nothing is allocated per row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeenIdentity<'a> {
    pub identity: &'a str,
    pub action: &'a str,
    /// When it was recorded (unix ms), so the caller can expire it at the end of its window.
    pub at_ms: i64,
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
    /// The latest delivery to this session still in the ledger.
    pub last_delivery_ms: Option<i64>,
    pub last_action: Option<String>,
    pub last_error_kind: Option<String>,
    /// The cooldown's start.
    pub last_wake_ms: Option<i64>,
    pub nudge: Option<NudgeState>,
    pub owed: Option<Owed>,
    pub paid: Option<Paid>,
    pub limit: Option<Limit>,
    pub inbox: Option<InboxRow>,
    /// When the bus or a person (`wakebridge wake`) last told it something.
    pub told_ms: Option<i64>,
    /// Opted in to be kept working (`WAKEBRIDGE=keep` at its start).
    pub kept: bool,
    /// The agent its hooks named (Claude Code for a session no hook reported).
    pub agent: Agent,
}

/// A person's pause of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pause {
    pub since_ms: i64,
    /// `None`: until unpaused.
    pub until_ms: Option<i64>,
    /// Every session is paused (`wakebridge pause --all`).
    pub all: bool,
}

/// The pause `session_id` is under at `now_ms`, its own before one of every session.
pub(crate) fn pause_of(
    conn: &rusqlite::Connection,
    session_id: &str,
    now_ms: i64,
) -> rusqlite::Result<Option<Pause>> {
    conn.prepare_cached(
        "SELECT since_ms, until_ms, session_id = '*' FROM pauses \
         WHERE session_id IN (?1, '*') AND (until_ms IS NULL OR until_ms > ?2) \
         ORDER BY session_id = '*' LIMIT 1",
    )?
    .query_row(params![session_id, now_ms], |row| {
        Ok(Pause {
            since_ms: row.get(0)?,
            until_ms: row.get(1)?,
            all: row.get(2)?,
        })
    })
    .optional()
}

/// A session's inbox as the ledger knows it: where its hook said it is, and the newest send.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InboxRow {
    /// `None` when only a send is recorded (the inbox came from Claude Code's registry).
    pub inbox: Option<Inbox>,
    /// When the newest send began.
    pub sent_ms: Option<i64>,
    /// When the session's hook reported that text, once it has.
    pub heard_ms: Option<i64>,
    /// When its hook last reported any prompt.
    pub prompted_ms: Option<i64>,
}

impl InboxRow {
    /// The newest send was neither reported by the session's hook nor followed by any prompt:
    /// Claude Code may still hold it (see `inbox::held_since`).
    pub fn unanswered_since(&self) -> Option<i64> {
        let sent = self.sent_ms?;
        (self.heard_ms.is_none() && self.prompted_ms.is_none_or(|p| p < sent)).then_some(sent)
    }

    /// When the newest send began, if it went unanswered for `inbox::UNHEARD_AFTER` at `now_ms`
    /// and Claude Code does not hold it for a human (`held`): the inbox is not used for the
    /// session until it takes a prompt again.
    pub fn unheard_since(&self, now_ms: i64, held: bool) -> Option<i64> {
        let after = crate::clock::duration_ms(crate::reading::inbox::UNHEARD_AFTER);
        let sent = self.unanswered_since()?;
        (!held && now_ms.saturating_sub(sent) >= after).then_some(sent)
    }
}

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
    /// When the oldest arrived.
    pub since_ms: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paid {
    pub last_ms: i64,
    pub last_how: Payment,
    pub last_events: u32,
    pub by_hook: u64,
    pub by_typing: u64,
    pub by_inbox: u64,
}

/// Every session id the ledger mentions with what it knows of it; `?1` restricts to one id.
const SESSIONS_SQL: &str = "\
WITH ids (session_id) AS (
    SELECT session_id FROM sessions
    UNION SELECT session_id FROM wakes
    UNION SELECT session_id FROM nudges
    UNION SELECT session_id FROM latest_deliveries
    UNION SELECT session_id FROM owed_payments
    UNION SELECT session_id FROM limits
    UNION SELECT session_id FROM rewinds WHERE outcome IS NULL
    UNION SELECT session_id FROM inboxes
)
SELECT ids.session_id, s.cwd, s.transcript_path, s.pane, s.last_hook_event,
       s.first_seen_ms, s.last_seen_ms, d.at_ms, d.action, d.error_kind, w.last_wake_ms,
       n.unanswered, n.last_nudge_ms, n.acknowledged,
       (SELECT count(*) FROM deliveries o WHERE o.target_session = ids.session_id AND o.owed = 1),
       (SELECT min(at_ms) FROM deliveries o WHERE o.target_session = ids.session_id AND o.owed = 1),
       p.last_paid_ms, p.last_how, p.last_events, p.by_hook, p.by_typing,
       m.kind, m.resets_text, m.resets_at_ms, m.seen_how, m.since_ms, m.tries, m.last_try_ms,
       m.gave_up, p.by_inbox,
       i.session_id, i.socket, i.token, i.pid, i.sent_ms, i.sent_heard_ms,
       i.heard_ms, l.told_ms, s.kept, s.agent, i.thread
FROM ids
LEFT JOIN sessions s ON s.session_id = ids.session_id
LEFT JOIN wakes w ON w.session_id = ids.session_id
LEFT JOIN nudges n ON n.session_id = ids.session_id
LEFT JOIN latest_deliveries l ON l.session_id = ids.session_id
LEFT JOIN deliveries d ON d.id = l.delivery_id
LEFT JOIN owed_payments p ON p.session_id = ids.session_id
LEFT JOIN limits m ON m.session_id = ids.session_id
LEFT JOIN inboxes i ON i.session_id = ids.session_id
WHERE ?1 IS NULL OR ids.session_id = ?1
ORDER BY ids.session_id";

fn session_row(row: &Row<'_>) -> rusqlite::Result<SessionRow> {
    let session_id: String = row.get(0)?;
    // Each joined table's key column is NULL when the session has no row there.
    let present = |at: usize| Ok::<_, rusqlite::Error>(row.get_ref(at)? != ValueRef::Null);
    let nudge = present(11)?.then(|| -> rusqlite::Result<_> {
        Ok(NudgeState {
            session_id: session_id.clone(),
            unanswered: row.get(11)?,
            last_nudge_ms: row.get(12)?,
            acknowledged: row.get(13)?,
        })
    });
    let owed = match (row.get::<_, u32>(14)?, row.get::<_, Option<i64>>(15)?) {
        (events @ 1.., Some(since_ms)) => Some(Owed { events, since_ms }),
        _ => None,
    };
    let paid = present(16)?.then(|| -> rusqlite::Result<_> {
        Ok(Paid {
            last_ms: row.get(16)?,
            last_how: row.get::<_, String>(17)?.parse().unwrap_or(Payment::Typed),
            last_events: row.get(18)?,
            by_hook: row.get(19)?,
            by_typing: row.get(20)?,
            by_inbox: row.get(29)?,
        })
    });
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
        nudge: nudge.transpose()?,
        owed,
        paid: paid.transpose()?,
        limit: present(21)?.then(|| limit_at(row, 21)).transpose()?,
        inbox: present(30)?.then(|| inbox_at(row, 31, 40)).transpose()?,
        told_ms: row.get(37)?,
        kept: row.get::<_, Option<bool>>(38)?.unwrap_or(false),
        agent: Agent::of_recorded(row.get::<_, Option<String>>(39)?.as_deref()),
    })
}

/// An `InboxRow` from the `inboxes` columns `socket`, `token`, `pid`, `sent_ms`, `sent_heard_ms`,
/// `heard_ms`, starting at `at`, and `thread` at `thread_at`.
fn inbox_at(row: &Row<'_>, at: usize, thread_at: usize) -> rusqlite::Result<InboxRow> {
    let socket: Option<String> = row.get(at)?;
    let (token, pid, thread) = (row.get(at + 1)?, row.get(at + 2)?, row.get(thread_at)?);
    Ok(InboxRow {
        inbox: socket.map(|socket| Inbox {
            socket: socket.into(),
            token,
            pid,
            thread,
        }),
        sent_ms: row.get(at + 3)?,
        heard_ms: row.get(at + 4)?,
        prompted_ms: row.get(at + 5)?,
    })
}

/// A `Limit` from the `limits` columns from `kind` to `gave_up`, starting at column `at`.
fn limit_at(row: &Row<'_>, at: usize) -> rusqlite::Result<Limit> {
    Ok(Limit {
        kind: row.get(at)?,
        resets_text: row.get(at + 1)?,
        resets_at_ms: row.get(at + 2)?,
        how: row
            .get::<_, String>(at + 3)?
            .parse()
            .unwrap_or(LimitSource::Statusline),
        since_ms: row.get(at + 4)?,
        tries: row.get(at + 5)?,
        last_try_ms: row.get(at + 6)?,
        gave_up: row.get(at + 7)?,
    })
}

/// Most renames followed from an id to the one its pane runs now: far more `/clear`s than a
/// message would wait through, and a bound should the table ever hold a loop.
pub(super) const MAX_RENAMES: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewindRow {
    /// The id the session had when it was asked.
    pub session_id: String,
    pub why: RewindWhy,
    pub asked_ms: i64,
    pub done_ms: Option<i64>,
    /// `None` while it waits.
    pub outcome: Option<RewindOutcome>,
    pub detail: Option<String>,
}

/// One rename: `old_id` became `new_id` in `pane` at `at_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alias {
    pub old_id: String,
    pub new_id: String,
    pub pane: String,
    pub at_ms: i64,
}

/// Every rename and rewind the ledger holds (both tables stay small: a row per `/clear`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rewinds {
    pub aliases: Vec<Alias>,
    /// Oldest first.
    pub rows: Vec<RewindRow>,
}

/// What the ledger knows of one session's rewinds, across the ids it had.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RewindFacts {
    /// The ids the session had before, newest first.
    pub formerly: Vec<String>,
    pub pending: Option<RewindRow>,
    /// Rewinds and restarts performed (outcome `done` or `not-typed`: the window was cleared).
    pub performed: u32,
    /// The last one that ended, whatever its outcome.
    pub last: Option<RewindRow>,
    pub last_performed_ms: Option<i64>,
}

impl Rewinds {
    /// `session_id`'s facts: its own rows and those of every id it had before.
    pub fn facts(&self, session_id: &str) -> RewindFacts {
        let formerly = self.formerly(session_id);
        let mine =
            |row: &&RewindRow| row.session_id == session_id || formerly.contains(&row.session_id);
        let rows: Vec<&RewindRow> = self.rows.iter().filter(mine).collect();
        let performed = || {
            let outcomes = [Some(RewindOutcome::Done), Some(RewindOutcome::NotTyped)];
            rows.iter().filter(move |r| outcomes.contains(&r.outcome))
        };
        RewindFacts {
            pending: rows.iter().find(|r| r.outcome.is_none()).copied().cloned(),
            performed: u32::try_from(performed().count()).unwrap_or(u32::MAX),
            last_performed_ms: performed().filter_map(|r| r.done_ms).max(),
            last: rows
                .iter()
                .filter(|r| r.outcome.is_some())
                .max_by_key(|r| r.done_ms)
                .copied()
                .cloned(),
            formerly,
        }
    }

    /// The ids `session_id` had before, newest first (bounded like [`Store::successor`]).
    pub fn formerly(&self, session_id: &str) -> Vec<String> {
        let mut ids: Vec<String> = Vec::new();
        let mut at = session_id;
        for _ in 0..MAX_RENAMES {
            let Some(alias) = self
                .aliases
                .iter()
                .filter(|a| a.new_id == at && a.old_id != session_id && !ids.contains(&a.old_id))
                .max_by_key(|a| a.at_ms)
            else {
                break;
            };
            ids.push(alias.old_id.clone());
            at = &alias.old_id;
        }
        ids
    }

    pub fn renamed(&self, session_id: &str) -> bool {
        self.aliases.iter().any(|a| a.old_id == session_id)
    }
}

/// [`Store::successor`] on `conn`: the renames followed from `session_id`, [`MAX_RENAMES`] at
/// most, so a loop in the table cannot hang a caller.
pub(super) fn successor(
    conn: &rusqlite::Connection,
    session_id: &str,
) -> rusqlite::Result<Option<(String, String)>> {
    let mut stmt = conn.prepare_cached("SELECT new_id, pane FROM aliases WHERE old_id = ?1")?;
    let mut found: Option<(String, String)> = None;
    for _ in 0..MAX_RENAMES {
        let from = found.as_ref().map_or(session_id, |(id, _)| id.as_str());
        match stmt
            .query_row(params![from], |row| Ok((row.get(0)?, row.get(1)?)))
            .optional()?
        {
            Some(next) => found = Some(next),
            None => break,
        }
    }
    Ok(found)
}

impl Store {
    /// Calls `each` with every delivery of an event identity since `since_ms`, oldest first (a
    /// repeated identity's latest last); returns how many. Streams the rows: the whole window
    /// is read at start-up, however busy it was.
    pub fn each_identity_since(
        &self,
        since_ms: i64,
        mut each: impl FnMut(SeenIdentity<'_>),
    ) -> Result<u64, StoreError> {
        self.read(|conn| {
            // Oldest first along the time index (which holds the rowid, so `at_ms, id` needs no
            // sort): a caller keeping the last row per identity keeps its latest delivery.
            let mut stmt = conn.prepare_cached(
                "SELECT identity, action, at_ms FROM deliveries \
                 WHERE at_ms >= ?1 AND identity IS NOT NULL ORDER BY at_ms, id",
            )?;
            let mut rows = stmt.query(params![since_ms])?;
            let mut read = 0;
            while let Some(row) = rows.next()? {
                each(SeenIdentity {
                    identity: row.get_ref(0)?.as_str()?,
                    action: row.get_ref(1)?.as_str()?,
                    at_ms: row.get(2)?,
                });
                read += 1;
            }
            Ok(read)
        })
    }

    pub fn last_wakes(&self) -> Result<HashMap<String, i64>, StoreError> {
        self.read(|conn| pairs(conn, "SELECT session_id, last_wake_ms FROM wakes", []))
    }

    /// Every session the ledger mentions, ordered by id.
    pub fn sessions(&self) -> Result<Vec<SessionRow>, StoreError> {
        self.read(|conn| {
            let mut stmt = conn.prepare_cached(SESSIONS_SQL)?;
            let rows = stmt.query_map(params![Option::<String>::None], session_row)?;
            rows.collect()
        })
    }

    pub fn session(&self, session_id: &str) -> Result<Option<SessionRow>, StoreError> {
        self.row_of(SESSIONS_SQL, session_id, session_row)
    }

    /// True when the `wakebridge hook` CLI has reported this session.
    pub fn known_session(&self, session_id: &str) -> Result<bool, StoreError> {
        let sql = "SELECT 1 FROM sessions WHERE session_id = ?1";
        Ok(self.row_of(sql, session_id, |_| Ok(()))?.is_some())
    }

    /// The usage limit `session_id` is held at, if any (the gate asks before every wake).
    pub fn limit(&self, session_id: &str) -> Result<Option<Limit>, StoreError> {
        let sql = "SELECT kind, resets_text, resets_at_ms, seen_how, since_ms, tries, last_try_ms, \
                   gave_up FROM limits WHERE session_id = ?1";
        self.row_of(sql, session_id, |row| limit_at(row, 0))
    }

    /// The pause `session_id` is under now, if any.
    pub fn pause(&self, session_id: &str) -> Result<Option<Pause>, StoreError> {
        let now_ms = crate::clock::now_ms();
        self.read(|conn| pause_of(conn, session_id, now_ms))
    }

    /// Every pause in force at `now_ms`, by session id ([`super::ALL_SESSIONS`]: every session).
    pub fn pauses(&self, now_ms: i64) -> Result<HashMap<String, Pause>, StoreError> {
        self.read(|conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT session_id, since_ms, until_ms FROM pauses \
                 WHERE until_ms IS NULL OR until_ms > ?1",
            )?;
            let rows = stmt.query_map(params![now_ms], |row| {
                let sid: String = row.get(0)?;
                let all = sid == super::ALL_SESSIONS;
                let (since_ms, until_ms) = (row.get(1)?, row.get(2)?);
                let pause = Pause {
                    since_ms,
                    until_ms,
                    all,
                };
                Ok((sid, pause))
            })?;
            rows.collect()
        })
    }

    /// `session_id`'s inbox row, if a hook announced one or something was sent there.
    pub fn inbox(&self, session_id: &str) -> Result<Option<InboxRow>, StoreError> {
        let sql = "SELECT socket, token, pid, sent_ms, sent_heard_ms, heard_ms, thread \
                   FROM inboxes WHERE session_id = ?1";
        self.row_of(sql, session_id, |row| inbox_at(row, 0, 6))
    }

    /// The row `sql` finds for `session_id` (its `?1`), if any, read by `map`.
    fn row_of<T>(
        &self,
        sql: &str,
        session_id: &str,
        map: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Option<T>, StoreError> {
        self.read(|conn| {
            let mut stmt = conn.prepare_cached(sql)?;
            stmt.query_row(params![session_id], map).optional()
        })
    }

    /// The id `session_id` is known by now and the pane it was given up in (`None`: never
    /// renamed). Whether that pane still runs it is the caller's to check in `panes.json`.
    pub fn successor(&self, session_id: &str) -> Result<Option<(String, String)>, StoreError> {
        self.read(|conn| successor(conn, session_id))
    }

    /// Rewinds by outcome (`None`: still waiting), for `/metrics`.
    pub fn rewind_counts(&self) -> Result<HashMap<Option<RewindOutcome>, u64>, StoreError> {
        let sql = "SELECT outcome, count(*) FROM rewinds GROUP BY outcome";
        let counts: Vec<(Option<String>, u64)> = self.read(|conn| pairs(conn, sql, []))?;
        let outcome = |word: String| word.parse().unwrap_or(RewindOutcome::Skipped);
        Ok(counts
            .into_iter()
            .map(|(o, n)| (o.map(outcome), n))
            .collect())
    }

    pub fn rewinds(&self) -> Result<Rewinds, StoreError> {
        self.read(|conn| {
            let aliases = conn
                .prepare_cached("SELECT old_id, new_id, pane, at_ms FROM aliases")?
                .query_map([], |row| {
                    Ok(Alias {
                        old_id: row.get(0)?,
                        new_id: row.get(1)?,
                        pane: row.get(2)?,
                        at_ms: row.get(3)?,
                    })
                })?
                .collect::<rusqlite::Result<_>>()?;
            let rows = conn
                .prepare_cached(
                    "SELECT session_id, why, asked_ms, done_ms, outcome, detail \
                     FROM rewinds ORDER BY id",
                )?
                .query_map([], |row| {
                    let outcome: Option<String> = row.get(4)?;
                    Ok(RewindRow {
                        session_id: row.get(0)?,
                        why: row.get::<_, String>(1)?.parse().unwrap_or(RewindWhy::Asked),
                        asked_ms: row.get(2)?,
                        done_ms: row.get(3)?,
                        outcome: outcome.map(|o| o.parse().unwrap_or(RewindOutcome::Skipped)),
                        detail: row.get(5)?,
                    })
                })?
                .collect::<rusqlite::Result<_>>()?;
            Ok(Rewinds { aliases, rows })
        })
    }
}
