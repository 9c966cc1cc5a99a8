//! The things wakebridge writes to its ledger and the SQL that writes each one. It owns the
//! record types and their insert/upsert statements; it does not own transactions or batching
//! (the writer thread does) nor any reads.

use super::{Alias, LimitSeen};
use crate::agent::Agent;
use crate::reading::inbox::Inbox;
use rusqlite::types::FromSql;
use rusqlite::{Connection, Params, ToSql, params};
use strum::{EnumIter, EnumString, IntoStaticStr};

/// The id a pause of every session is recorded under (no session id is `*`: see
/// `wire::session_id`).
pub const ALL_SESSIONS: &str = "*";

/// Which part of wakebridge produced a delivery row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, IntoStaticStr, EnumString)]
#[strum(serialize_all = "kebab-case")]
pub enum DeliverySource {
    /// A webhook from the bus (`POST /hook`).
    Hook,
    /// A wake typed into a pane outside a webhook (for example `wakebridge wake`).
    Wake,
    /// The idle nudger.
    Nudge,
    /// The context monitor's warnings.
    Context,
}

/// One outcome: an event answered, a wake or nudge typed, a warning sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub at_ms: i64,
    pub source: DeliverySource,
    /// Hex digest that recognises a redelivered event, if the source has one.
    pub identity: Option<String>,
    pub event_id: Option<String>,
    /// Who sent it (the event's `session_id`, or the wakebridge component for local sources).
    pub sender: String,
    pub target_session: String,
    /// The `action` answered or taken (`tmux`, `spool-busy`, ...).
    pub action: String,
    pub spool_us: Option<u64>,
    pub inject_us: Option<u64>,
    pub error_kind: Option<String>,
    /// A bus event whose wake was not typed and submitted: a wake owes it (see [`Payment`]).
    pub owed: bool,
}

/// How a session's owed wakes were paid (the stored spelling is also the metrics' `how`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, IntoStaticStr, EnumString)]
#[strum(serialize_all = "kebab-case")]
pub enum Payment {
    /// The session's Stop hook kept Claude Code going with the wake prompt.
    Hook,
    /// A wake prompt was typed and submitted into its pane.
    Typed,
    /// A wake prompt was taken by the session's inbox.
    Inbox,
}

/// A Claude Code hook reported this session (upsert: a `None` field keeps the stored value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSeen {
    pub session_id: String,
    pub cwd: Option<String>,
    pub transcript_path: Option<String>,
    /// `PaneTarget`'s Display form.
    pub pane: Option<String>,
    /// `Stop`, `UserPromptSubmit`, ...
    pub last_hook_event: Option<String>,
    /// The stored value never moves backwards.
    pub seen_at_ms: i64,
    /// Opted in to be kept working (`WAKEBRIDGE=keep` at its start); once set, it stays.
    pub kept: bool,
    /// The agent its hooks named.
    pub agent: Agent,
}

/// The idle nudger's state for one session (upsert: replaces the stored row).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NudgeState {
    pub session_id: String,
    /// Nudges typed since the session last showed life.
    pub unanswered: u32,
    pub last_nudge_ms: Option<i64>,
    /// The nudger has fallen silent for this session until it shows life again.
    pub acknowledged: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    Delivery(Delivery),
    /// The gate's answer for a delivery recorded with its spool round (provisional `spool`):
    /// `row`'s action, timings, error kind and `owed` replace the stored ones.
    Outcome {
        delivery_id: i64,
        row: Delivery,
    },
    SessionSeen(SessionSeen),
    Nudge(NudgeState),
    /// A successful wake (the cooldown's start); the stored value never moves backwards.
    Wake {
        session_id: String,
        at_ms: i64,
    },
    Pay {
        session_id: String,
        up_to_ms: i64,
        how: Payment,
    },
    /// The daemon's wake was refused before anything was typed: its claim on the debt ends, so
    /// the session's Stop hook may pay it.
    Unclaim {
        session_id: String,
    },
    /// Upsert: a limit seen again keeps its tries, and a reset not known keeps the one known.
    Limited(LimitSeen),
    /// A resume message was typed for the session's limit.
    ResumeTried {
        session_id: String,
        at_ms: i64,
    },
    /// The resumes ran out: held, never typed into again until it shows life.
    ResumeGaveUp {
        session_id: String,
    },
    LimitLifted {
        session_id: String,
    },
    /// The agent in `pane` gave up `old_id` for `new_id` (a `/clear`): messages, owed events and
    /// the limit of `old_id` go to `new_id`.
    Renamed(Alias),
    /// A rewind was asked for. At most one waits per session: asking again changes nothing.
    RewindAsked {
        session_id: String,
        why: RewindWhy,
        at_ms: i64,
    },
    /// A turn one of wakebridge's texts started, and what it cost.
    Caused(super::Caused),
    /// A person paused `session_id` ([`ALL_SESSIONS`]: every session) until `until_ms`
    /// (`None`: until unpaused); pausing again replaces it.
    Paused {
        session_id: String,
        since_ms: i64,
        until_ms: Option<i64>,
    },
    /// The pause of `session_id` is lifted; [`ALL_SESSIONS`] lifts every pause.
    Unpaused {
        session_id: String,
    },
    /// A hook announced the session's inbox (`claude::inbox`).
    InboxSeen {
        session_id: String,
        inbox: Inbox,
        at_ms: i64,
    },
    /// A message was taken by the session's inbox; `digest` is `inbox::digest`'s of its text.
    InboxSent {
        session_id: String,
        digest: String,
        at_ms: i64,
    },
    /// The session's `UserPromptSubmit` hook reported a prompt (its digest): the newest send
    /// was heard if it was that text, reported after the send began.
    InboxHeard {
        session_id: String,
        digest: String,
        at_ms: i64,
    },
    /// The rewind waiting for `session_id` ended; `new_id` is the session's id after it.
    RewindEnded {
        session_id: String,
        outcome: RewindOutcome,
        new_id: Option<String>,
        detail: Option<String>,
        at_ms: i64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, IntoStaticStr, EnumString)]
#[strum(serialize_all = "kebab-case")]
pub enum RewindWhy {
    /// The agent (or someone for it) asked: `wakebridge rewind`, `POST /rewind`.
    Asked,
    /// `[rewind] auto`: past the checkpoint threshold, told to checkpoint, then idle.
    Auto,
    /// `wakebridge rewind --restart`: the agent started again in its pane (or a new one).
    Restart,
}

/// How a rewind ended (the stored spelling is also the metrics' `outcome` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, IntoStaticStr, EnumString, EnumIter)]
#[strum(serialize_all = "kebab-case")]
pub enum RewindOutcome {
    /// Cleared (or restarted) and the re-hydration prompt delivered.
    Done,
    /// Cleared (or restarted), but the re-hydration prompt could not be typed.
    NotTyped,
    /// Nothing was cleared (`/clear` not taken, no fresh prompt, the restart did not start).
    Failed,
    /// Not performed: too soon after the last one, or the session went away.
    Skipped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, IntoStaticStr, EnumString)]
#[strum(serialize_all = "kebab-case")]
pub enum LimitSource {
    Screen,
    Transcript,
    Hook,
    Statusline,
}

// Their stored spelling: the migrations' CHECK constraints list it, existing ledgers hold it.
crate::strum_as_str!(
    DeliverySource,
    Payment,
    RewindWhy,
    RewindOutcome,
    LimitSource
);

/// Microseconds as SQLite's signed integer; durations beyond 292 000 years saturate.
fn micros(value: Option<u64>) -> Option<i64> {
    value.map(|us| i64::try_from(us).unwrap_or(i64::MAX))
}

/// Runs `sql` once with `params` on a cached statement; returns the rows changed.
pub(super) fn exec(conn: &Connection, sql: &str, params: impl Params) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

/// The rows of `sql`, a query of two columns, as pairs.
pub(super) fn pairs<A: FromSql, B: FromSql, C: FromIterator<(A, B)>>(
    conn: &Connection,
    sql: &str,
    params: impl Params,
) -> rusqlite::Result<C> {
    conn.prepare_cached(sql)?
        .query_map(params, |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect()
}

pub(super) fn insert_delivery(conn: &Connection, d: &Delivery) -> rusqlite::Result<i64> {
    exec(
        conn,
        "INSERT INTO deliveries (at_ms, source, identity, event_id, sender, \
         target_session, action, spool_us, inject_us, error_kind, owed) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        params![
            d.at_ms,
            d.source.as_str(),
            d.identity,
            d.event_id,
            d.sender,
            d.target_session,
            d.action,
            micros(d.spool_us),
            micros(d.inject_us),
            d.error_kind,
            d.owed,
        ],
    )?;
    Ok(conn.last_insert_rowid())
}

/// Points `latest_deliveries` at delivery `id` of `session` unless a later one is there, and
/// notes when the bus or a person last `told` it something (an older row too: clocks differ).
/// Once per session per commit, not per row: with a busy session every row would rewrite the
/// same page.
pub(super) fn note_latest(
    conn: &Connection,
    session: &str,
    id: i64,
    at_ms: i64,
    told: bool,
) -> rusqlite::Result<usize> {
    exec(
        conn,
        "INSERT INTO latest_deliveries (session_id, delivery_id, at_ms, told_ms) \
         VALUES (?1, ?2, ?3, iif(?4, ?3, NULL)) \
         ON CONFLICT (session_id) DO UPDATE SET \
         delivery_id = iif(excluded.at_ms >= at_ms, excluded.delivery_id, delivery_id), \
         at_ms = max(excluded.at_ms, at_ms), \
         told_ms = max(ifnull(excluded.told_ms, told_ms), ifnull(told_ms, excluded.told_ms))",
        params![session, id, at_ms, told],
    )
}

/// Writes one record with cached statements; the caller owns the transaction. The inbox and
/// pause rows are written by the daemon and the hook process alike, each column by one of them,
/// so neither undoes the other's write.
pub(crate) fn apply(conn: &Connection, record: &Record) -> rusqlite::Result<()> {
    let exec = |sql: &str, params: &[&dyn ToSql]| exec(conn, sql, params);
    match record {
        Record::Delivery(d) => {
            let id = insert_delivery(conn, d)?;
            let told = matches!(d.source, DeliverySource::Hook | DeliverySource::Wake);
            note_latest(conn, &d.target_session, id, d.at_ms, told)
        }
        Record::Outcome { delivery_id, row } => exec(
            "UPDATE deliveries SET action = ?2, spool_us = ?3, inject_us = ?4, \
             error_kind = ?5, owed = ?6 WHERE id = ?1",
            params![
                delivery_id,
                row.action,
                micros(row.spool_us),
                micros(row.inject_us),
                row.error_kind,
                row.owed,
            ],
        ),
        Record::SessionSeen(s) => exec(
            "INSERT INTO sessions (session_id, cwd, transcript_path, pane, last_hook_event, \
             first_seen_ms, last_seen_ms, kept, agent) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7, ?8) \
             ON CONFLICT (session_id) DO UPDATE SET \
             cwd = coalesce(excluded.cwd, cwd), \
             transcript_path = coalesce(excluded.transcript_path, transcript_path), \
             pane = coalesce(excluded.pane, pane), \
             last_hook_event = coalesce(excluded.last_hook_event, last_hook_event), \
             last_seen_ms = max(last_seen_ms, excluded.last_seen_ms), \
             kept = max(kept, excluded.kept), agent = excluded.agent",
            params![
                s.session_id,
                s.cwd,
                s.transcript_path,
                s.pane,
                s.last_hook_event,
                s.seen_at_ms,
                s.kept,
                s.agent.as_str(),
            ],
        ),
        Record::Nudge(n) => exec(
            "INSERT INTO nudges (session_id, unanswered, last_nudge_ms, acknowledged) \
             VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (session_id) DO UPDATE SET unanswered = excluded.unanswered, \
             last_nudge_ms = excluded.last_nudge_ms, acknowledged = excluded.acknowledged",
            params![n.session_id, n.unanswered, n.last_nudge_ms, n.acknowledged],
        ),
        Record::Wake { session_id, at_ms } => exec(
            "INSERT INTO wakes (session_id, last_wake_ms) VALUES (?1, ?2) \
             ON CONFLICT (session_id) DO UPDATE SET \
             last_wake_ms = max(last_wake_ms, excluded.last_wake_ms)",
            params![session_id, at_ms],
        ),
        Record::Pay {
            session_id,
            up_to_ms,
            how,
        } => pay(conn, session_id, *up_to_ms, *how).map(|_| 0),
        Record::Unclaim { session_id } => exec(
            "DELETE FROM claims WHERE session_id = ?1",
            params![session_id],
        ),
        Record::Limited(seen) => super::limits::upsert(conn, seen),
        Record::ResumeTried { session_id, at_ms } => exec(
            "UPDATE limits SET tries = tries + 1, last_try_ms = ?2 WHERE session_id = ?1",
            params![session_id, at_ms],
        ),
        Record::ResumeGaveUp { session_id } => exec(
            "UPDATE limits SET gave_up = 1 WHERE session_id = ?1",
            params![session_id],
        ),
        Record::LimitLifted { session_id } => exec(
            "DELETE FROM limits WHERE session_id = ?1",
            params![session_id],
        ),
        Record::Renamed(alias) => rename(conn, alias),
        Record::RewindAsked {
            session_id,
            why,
            at_ms,
        } => exec(
            "INSERT INTO rewinds (session_id, why, asked_ms) VALUES (?1, ?2, ?3) \
             ON CONFLICT (session_id) WHERE outcome IS NULL DO NOTHING",
            params![session_id, why.as_str(), at_ms],
        ),
        Record::Caused(caused) => super::caused::apply(conn, caused),
        Record::Paused {
            session_id,
            since_ms,
            until_ms,
        } => exec(
            "INSERT OR REPLACE INTO pauses (session_id, since_ms, until_ms) VALUES (?1, ?2, ?3)",
            params![session_id, since_ms, until_ms],
        ),
        // `*` is ALL_SESSIONS: it lifts every pause.
        Record::Unpaused { session_id } => exec(
            "DELETE FROM pauses WHERE ?1 = '*' OR session_id = ?1",
            params![session_id],
        ),
        Record::InboxSeen {
            session_id,
            inbox,
            at_ms,
        } => exec(
            "INSERT INTO inboxes (session_id, socket, token, pid, seen_ms, thread) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (session_id) DO UPDATE SET \
             socket = excluded.socket, token = excluded.token, pid = excluded.pid, \
             seen_ms = excluded.seen_ms, thread = excluded.thread",
            params![
                session_id,
                inbox.socket.to_string_lossy(),
                inbox.token,
                inbox.pid,
                at_ms,
                inbox.thread,
            ],
        ),
        Record::InboxSent {
            session_id,
            digest,
            at_ms,
        } => exec(
            "INSERT INTO inboxes (session_id, sent_digest, sent_ms) VALUES (?1, ?2, ?3) \
             ON CONFLICT (session_id) DO UPDATE SET sent_digest = excluded.sent_digest, \
             sent_ms = excluded.sent_ms, sent_heard_ms = CASE \
             WHEN heard_digest = excluded.sent_digest AND heard_ms >= excluded.sent_ms \
             THEN heard_ms END",
            params![session_id, digest, at_ms],
        ),
        Record::InboxHeard {
            session_id,
            digest,
            at_ms,
        } => exec(
            "INSERT INTO inboxes (session_id, heard_digest, heard_ms) VALUES (?1, ?2, ?3) \
             ON CONFLICT (session_id) DO UPDATE SET heard_digest = excluded.heard_digest, \
             heard_ms = excluded.heard_ms, sent_heard_ms = CASE \
             WHEN sent_digest = excluded.heard_digest AND excluded.heard_ms >= sent_ms \
             THEN excluded.heard_ms ELSE sent_heard_ms END",
            params![session_id, digest, at_ms],
        ),
        Record::RewindEnded {
            session_id,
            outcome,
            new_id,
            detail,
            at_ms,
        } => exec(
            "UPDATE rewinds SET outcome = ?2, new_id = ?3, detail = ?4, done_ms = ?5 \
             WHERE session_id = ?1 AND outcome IS NULL",
            params![session_id, outcome.as_str(), new_id, detail, at_ms],
        ),
    }
    .map(drop)
}

/// Records that `old_id` is now `new_id` in `pane`. Owed events, the limit, a person's pause and
/// being an agent wakebridge keeps are the agent's: they move to the new id. A rename back to an id the chain holds drops that
/// id's alias, so the chain never loops.
fn rename(conn: &Connection, alias: &Alias) -> rusqlite::Result<usize> {
    let Alias { old_id, new_id, .. } = alias;
    if old_id == new_id {
        return Ok(0);
    }
    exec(
        conn,
        "DELETE FROM aliases WHERE old_id = ?1",
        params![new_id],
    )?;
    exec(
        conn,
        "INSERT INTO aliases (old_id, new_id, pane, at_ms) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (old_id) DO UPDATE SET new_id = excluded.new_id, pane = excluded.pane, \
         at_ms = excluded.at_ms",
        params![old_id, new_id, alias.pane, alias.at_ms],
    )?;
    for sql in [
        "UPDATE deliveries SET target_session = ?2 WHERE target_session = ?1 AND owed = 1",
        "UPDATE OR IGNORE limits SET session_id = ?2 WHERE session_id = ?1",
        "UPDATE OR IGNORE pauses SET session_id = ?2 WHERE session_id = ?1",
        // An agent kept (opted in, or told something by the bus or a person) stays one.
        "UPDATE sessions SET kept = 1 WHERE session_id = ?2 AND ( \
             EXISTS (SELECT 1 FROM sessions WHERE session_id = ?1 AND kept = 1) \
             OR EXISTS (SELECT 1 FROM latest_deliveries \
                        WHERE session_id = ?1 AND told_ms IS NOT NULL))",
    ] {
        exec(conn, sql, params![old_id, new_id])?;
    }
    Ok(0)
}

/// Claims `session_id`'s owed events for a wake the daemon is about to send, until `until_ms`:
/// its Stop hook pays nothing while the claim stands (the two would tell one debt twice).
/// Returns how many events are owed; with none, nothing is claimed.
pub(crate) fn claim(conn: &Connection, session_id: &str, until_ms: i64) -> rusqlite::Result<u32> {
    let owed: u32 = conn
        .prepare_cached("SELECT count(*) FROM deliveries WHERE target_session = ?1 AND owed = 1")?
        .query_row(params![session_id], |row| row.get(0))?;
    if owed > 0 {
        exec(
            conn,
            "INSERT INTO claims (session_id, until_ms) VALUES (?1, ?2) \
             ON CONFLICT (session_id) DO UPDATE SET until_ms = excluded.until_ms",
            params![session_id, until_ms],
        )?;
    }
    Ok(owed)
}

/// Whether the daemon's claim on `session_id`'s debt still stands at `now_ms`.
pub(crate) fn claimed(conn: &Connection, session_id: &str, now_ms: i64) -> rusqlite::Result<bool> {
    conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM claims WHERE session_id = ?1 AND until_ms > ?2)",
    )?
    .query_row(params![session_id, now_ms], |row| row.get(0))
}

/// Pays `session_id`'s owed events up to `up_to_ms` and ends any claim on them; returns how
/// many. One statement clears them, so two payers (the hook CLI and the daemon) never both pay
/// the same events.
pub(crate) fn pay(
    conn: &Connection,
    session_id: &str,
    up_to_ms: i64,
    how: Payment,
) -> rusqlite::Result<u64> {
    exec(
        conn,
        "DELETE FROM claims WHERE session_id = ?1",
        params![session_id],
    )?;
    let paid = exec(
        conn,
        "UPDATE deliveries SET owed = 0 WHERE target_session = ?1 AND owed = 1 AND at_ms <= ?2",
        params![session_id, up_to_ms],
    )? as u64;
    if paid > 0 {
        exec(
            conn,
            "INSERT INTO owed_payments (session_id, last_paid_ms, last_how, last_events, \
             by_hook, by_typing, by_inbox) \
             VALUES (?1, ?2, ?3, ?4, ?3 = 'hook', ?3 = 'typed', ?3 = 'inbox') \
             ON CONFLICT (session_id) DO UPDATE SET last_paid_ms = excluded.last_paid_ms, \
             last_how = excluded.last_how, last_events = excluded.last_events, \
             by_hook = by_hook + excluded.by_hook, by_typing = by_typing + excluded.by_typing, \
             by_inbox = by_inbox + excluded.by_inbox",
            params![session_id, crate::clock::now_ms(), how.as_str(), paid],
        )?;
    }
    Ok(paid)
}
