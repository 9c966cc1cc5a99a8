//! The things wakebridge writes to its ledger and the SQL that writes each one. It owns the
//! record types and their insert/upsert statements; it does not own transactions or batching
//! (the writer thread does) nor any reads.

use crate::claude::limits::{Notice, WRITTEN_EARLIER, WRITTEN_NOW};
use rusqlite::{Connection, OptionalExtension, params};

/// Which part of wakebridge produced a delivery row (stored as its kebab-case name, as the
/// table's CHECK constraint lists them).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::EnumIter,
)]
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
    /// Wall-clock unix milliseconds.
    pub at_ms: i64,
    pub source: DeliverySource,
    /// Hex digest that recognises a redelivered event, if the source has one.
    pub identity: Option<String>,
    /// The bus's event id, if any.
    pub event_id: Option<String>,
    /// Who sent it (the event's `session_id`, or the wakebridge component for local sources).
    pub sender: String,
    /// The session the outcome was for.
    pub target_session: String,
    /// The `action` answered or taken (`tmux`, `spool-busy`, ...).
    pub action: String,
    /// Time spent appending to the spool, if it was appended.
    pub spool_us: Option<u64>,
    /// Time spent typing into the pane, if it was attempted.
    pub inject_us: Option<u64>,
    /// Short machine-readable failure kind, if something failed.
    pub error_kind: Option<String>,
    /// A bus event whose wake was not typed and submitted: a wake owes it (see [`Payment`]).
    pub owed: bool,
}

/// How a session's owed wakes were paid (the stored spelling is also the metrics' `how`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::EnumIter,
)]
#[strum(serialize_all = "kebab-case")]
pub enum Payment {
    /// The session's Stop hook kept Claude Code going with the wake prompt.
    Hook,
    /// A wake prompt was typed and submitted into its pane.
    Typed,
}

/// A Claude Code hook reported this session (upsert: a `None` field keeps the stored value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSeen {
    pub session_id: String,
    pub cwd: Option<String>,
    pub transcript_path: Option<String>,
    /// The pane target as text (`PaneTarget`'s Display form).
    pub pane: Option<String>,
    /// The hook event name (`Stop`, `UserPromptSubmit`, ...).
    pub last_hook_event: Option<String>,
    /// Wall-clock unix milliseconds; the stored value never moves backwards.
    pub seen_at_ms: i64,
}

/// The idle nudger's state for one session (upsert: replaces the stored row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NudgeState {
    pub session_id: String,
    /// Nudges typed since the session last showed life.
    pub unanswered: u32,
    /// Wall-clock unix milliseconds of the last nudge, if any.
    pub last_nudge_ms: Option<i64>,
    /// The nudger has fallen silent for this session until it shows life again.
    pub acknowledged: bool,
}

/// One session's share of a spool round: `bytes` (whole lines) go into the session file with
/// inode `inode`, at `offset`. Recorded before the bytes are written (see `SpoolRound`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingBytes {
    pub session_id: String,
    pub inode: u64,
    pub offset: u64,
    pub bytes: Vec<u8>,
}

/// The write-ahead record of one round of spool appends, committed durably (fsync) before any
/// of its bytes reach a session file: each session's bytes, with the delivery rows (and so the
/// event identities) of the lines they hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpoolRound {
    /// The wake dir, canonical: the key a restart replays by.
    pub wake_dir: String,
    pub sessions: Vec<(PendingBytes, Vec<Delivery>)>,
}

/// The row ids a committed round got, per session: the round's pending row and the session's
/// deliveries in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundIds {
    pub pending: i64,
    pub deliveries: Vec<i64>,
}

/// One session's entry in a pending row's `shares`: session, inode, file offset, and where its
/// bytes are in the row's `bytes` (start, length).
type Share = (String, u64, u64, usize, usize);

/// Everything that can be written through `Store::record`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    Delivery(Delivery),
    /// What became of a delivery recorded with its spool round (with the provisional action
    /// `spool`): the gate's answer, once known.
    Outcome {
        delivery_id: i64,
        action: String,
        spool_us: Option<u64>,
        inject_us: Option<u64>,
        error_kind: Option<String>,
        owed: bool,
    },
    SessionSeen(SessionSeen),
    Nudge(NudgeState),
    /// A successful wake of `session_id` at `at_ms` (the cooldown starts here). The stored
    /// value never moves backwards, so records committed out of order cannot shorten it.
    Wake {
        session_id: String,
        at_ms: i64,
    },
    /// `session_id`'s owed events recorded up to `up_to_ms` are paid, `how`.
    Pay {
        session_id: String,
        up_to_ms: i64,
        how: Payment,
    },
    /// `session_id` is at a usage limit (upsert: a limit seen again keeps its tries; a reset
    /// not known this time keeps the one known).
    Limited(LimitSeen),
    /// A resume message was typed at `at_ms` for `session_id`'s limit.
    ResumeTried {
        session_id: String,
        at_ms: i64,
    },
    /// The resumes of `session_id`'s limit ran out: held, never typed into again until it
    /// shows life.
    ResumeGaveUp {
        session_id: String,
    },
    /// `session_id` is no longer held at a limit.
    LimitLifted {
        session_id: String,
    },
    /// The agent in `pane` gave up `old_id` for `new_id` (a `/clear`): a message to `old_id`
    /// now reaches `new_id` there, and what `old_id` was owed and the limit it was held at go
    /// with it.
    Renamed {
        old_id: String,
        new_id: String,
        pane: String,
        at_ms: i64,
    },
    /// A rewind of `session_id` was asked for. At most one waits per session: asking again
    /// changes nothing.
    RewindAsked {
        session_id: String,
        why: RewindWhy,
        at_ms: i64,
    },
    /// The rewind waiting for `session_id` ended `outcome`; `new_id` is the id the session has
    /// after it.
    RewindEnded {
        session_id: String,
        outcome: RewindOutcome,
        new_id: Option<String>,
        detail: Option<String>,
        at_ms: i64,
    },
}

/// Why a session was rewound.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::EnumIter,
)]
#[strum(serialize_all = "kebab-case")]
pub enum RewindWhy {
    /// The agent (or someone for it) asked: `wakebridge rewind`, `POST /rewind`.
    Asked,
    /// `[rewind] auto`: past the checkpoint threshold, told to checkpoint, then idle.
    Auto,
    /// `wakebridge rewind --restart`: the agent started again in its pane (or, its pane or
    /// tmux server gone, in a new one).
    Restart,
}

/// How a rewind ended (the stored spelling is also the metrics' `outcome` label).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::EnumIter,
)]
#[strum(serialize_all = "kebab-case")]
pub enum RewindOutcome {
    /// Cleared (or restarted) and the re-hydration prompt delivered.
    Done,
    /// Cleared (or restarted), but the re-hydration prompt could not be typed.
    NotTyped,
    /// Nothing was cleared: `/clear` was not taken, the fresh prompt never showed, or the
    /// restart did not start.
    Failed,
    /// Not performed: too soon after the last one, or the session went away.
    Skipped,
}

/// How a usage limit was seen.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::EnumIter,
)]
#[strum(serialize_all = "kebab-case")]
pub enum LimitSource {
    Screen,
    Transcript,
    Hook,
    Statusline,
}

/// Gives each enum stored as text an `as_str`: its stored spelling (strum's kebab-case name),
/// which the migrations' CHECK constraints list and existing ledgers hold.
macro_rules! stored_as_text {
    ($($kind:ty),*) => {$(
        impl $kind {
            pub fn as_str(self) -> &'static str {
                self.into()
            }
        }
    )*};
}
stored_as_text!(
    DeliverySource,
    Payment,
    RewindWhy,
    RewindOutcome,
    LimitSource
);

/// A usage limit as one signal reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitSeen {
    pub session_id: String,
    /// `session limit`, `weekly limit`, ...
    pub kind: String,
    /// The reset as Claude Code wrote it, if it did.
    pub resets_text: Option<String>,
    /// The reset, unix ms, if known.
    pub resets_at_ms: Option<i64>,
    /// `resets_at_ms` is to the second (a transcript record's `resetsAt`, the status line's
    /// `rate_limits`), not read from a notice's minute.
    pub resets_exact: bool,
    pub how: LimitSource,
    pub at_ms: i64,
}

impl LimitSeen {
    /// `notice`, seen `how` at `now_ms`, its reset read from then in this machine's zone (the
    /// latest moment of the minute it shows: `Notice::lifts_by_ms`). A
    /// notice found on a screen may have been written a while before ([`WRITTEN_EARLIER`]);
    /// `written_now` says it was not (a hook, a transcript record at its own time, the screen
    /// right after a resume).
    pub fn of_notice(
        session_id: &str,
        notice: Notice,
        how: LimitSource,
        now_ms: i64,
        written_now: bool,
    ) -> Self {
        let past_ms = if written_now {
            WRITTEN_NOW
        } else {
            WRITTEN_EARLIER
        };
        Self {
            session_id: session_id.to_owned(),
            resets_at_ms: notice.lifts_by_ms(now_ms, past_ms, &jiff::tz::TimeZone::system()),
            kind: notice.kind,
            resets_text: notice.resets,
            resets_exact: false,
            how,
            at_ms: now_ms,
        }
    }

    /// This limit with its reset to the second, `exact_ms`, where one is known: it replaces
    /// the minute the notice shows.
    pub fn with_exact_reset(mut self, exact_ms: Option<i64>) -> Self {
        if let Some(at) = exact_ms {
            self.resets_at_ms = Some(at);
            self.resets_exact = true;
        }
        self
    }
}

/// Microseconds as SQLite's signed integer; durations beyond 292 000 years saturate.
fn micros(value: Option<u64>) -> Option<i64> {
    value.map(|us| i64::try_from(us).unwrap_or(i64::MAX))
}

fn insert_delivery(conn: &Connection, d: &Delivery) -> rusqlite::Result<i64> {
    conn.prepare_cached(
        "INSERT INTO deliveries (at_ms, source, identity, event_id, sender, \
         target_session, action, spool_us, inject_us, error_kind, owed) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?
    .execute(params![
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
    ])?;
    Ok(conn.last_insert_rowid())
}

/// Points `latest_deliveries` at delivery `id` of `session` (at `at_ms`) unless a later one is
/// there already. Once per session per commit, not per row: with a busy session every row
/// would rewrite the same page.
fn note_latest(conn: &Connection, session: &str, id: i64, at_ms: i64) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO latest_deliveries (session_id, delivery_id, at_ms) VALUES (?1, ?2, ?3) \
         ON CONFLICT (session_id) DO UPDATE \
         SET delivery_id = excluded.delivery_id, at_ms = excluded.at_ms \
         WHERE excluded.at_ms >= latest_deliveries.at_ms",
    )?
    .execute(params![session, id, at_ms])?;
    Ok(())
}

/// Writes a spool round's record; the caller owns the (durable) transaction. One pending row
/// holds every session's bytes: a round of many sessions costs one insert, not one per session.
pub(crate) fn apply_round(
    conn: &Connection,
    round: &SpoolRound,
) -> rusqlite::Result<Vec<RoundIds>> {
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
    conn.prepare_cached("INSERT INTO spool_pending (wake_dir, shares, bytes) VALUES (?1, ?2, ?3)")?
        .execute(params![round.wake_dir, shares, bytes])?;
    let pending = conn.last_insert_rowid();
    let mut ids = Vec::with_capacity(round.sessions.len());
    for (_, rows) in &round.sessions {
        let deliveries: Vec<i64> = rows
            .iter()
            .map(|d| insert_delivery(conn, d))
            .collect::<rusqlite::Result<_>>()?;
        if let (Some(&id), Some(last)) = (deliveries.last(), rows.last()) {
            note_latest(conn, &last.target_session, id, last.at_ms)?;
        }
        ids.push(RoundIds {
            pending,
            deliveries,
        });
    }
    Ok(ids)
}

/// The sessions' shares of a pending row, as `PendingBytes`.
pub(crate) fn unpack_round(shares: &str, bytes: &[u8]) -> Vec<PendingBytes> {
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

/// Forgets pending spool bytes of `wake_dir` up to row `upto` (their files are synced).
pub(crate) fn spool_synced(conn: &Connection, wake_dir: &str, upto: i64) -> rusqlite::Result<u64> {
    let deleted = conn
        .prepare_cached("DELETE FROM spool_pending WHERE wake_dir = ?1 AND id <= ?2")?
        .execute(params![wake_dir, upto])?;
    Ok(deleted as u64)
}

/// Takes back one session's share of a round whose bytes could not be written: its events were
/// refused, so neither a restart may append them nor their identities make a retry look like a
/// redelivery.
pub(crate) fn forget_share(
    conn: &Connection,
    session_id: &str,
    ids: &RoundIds,
) -> rusqlite::Result<u64> {
    let shares: Option<String> = conn
        .prepare_cached("SELECT shares FROM spool_pending WHERE id = ?1")?
        .query_row(params![ids.pending], |row| row.get(0))
        .optional()?;
    let mut deleted = 0;
    if let Some(shares) = shares {
        let mut shares: Vec<Share> = serde_json::from_str(&shares).unwrap_or_default();
        shares.retain(|share| share.0 != session_id);
        if shares.is_empty() {
            deleted += conn
                .prepare_cached("DELETE FROM spool_pending WHERE id = ?1")?
                .execute(params![ids.pending])?;
        } else {
            let shares = serde_json::to_string(&shares)
                .map_err(|e| rusqlite::Error::ToSqlConversionFailure(e.into()))?;
            conn.prepare_cached("UPDATE spool_pending SET shares = ?2 WHERE id = ?1")?
                .execute(params![ids.pending, shares])?;
        }
    }
    let mut stmt = conn.prepare_cached("DELETE FROM deliveries WHERE id = ?1")?;
    for id in &ids.deliveries {
        deleted += stmt.execute(params![id])?;
    }
    forget_latest_if_gone(conn, session_id)?;
    Ok(deleted as u64)
}

/// Drops `session_id` from `latest_deliveries` when the delivery it points to was deleted.
fn forget_latest_if_gone(conn: &Connection, session_id: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "DELETE FROM latest_deliveries WHERE session_id = ?1 AND NOT EXISTS \
         (SELECT 1 FROM deliveries WHERE id = latest_deliveries.delivery_id)",
    )?
    .execute(params![session_id])?;
    Ok(())
}

/// Writes one record with cached statements; the caller owns the transaction.
pub(crate) fn apply(conn: &Connection, record: &Record) -> rusqlite::Result<()> {
    match record {
        Record::Delivery(d) => {
            let id = insert_delivery(conn, d)?;
            note_latest(conn, &d.target_session, id, d.at_ms)?;
        }
        Record::Outcome {
            delivery_id,
            action,
            spool_us,
            inject_us,
            error_kind,
            owed,
        } => {
            conn.prepare_cached(
                "UPDATE deliveries SET action = ?2, spool_us = ?3, inject_us = ?4, \
                 error_kind = ?5, owed = ?6 WHERE id = ?1",
            )?
            .execute(params![
                delivery_id,
                action,
                micros(*spool_us),
                micros(*inject_us),
                error_kind,
                owed,
            ])?;
        }
        Record::SessionSeen(s) => {
            conn.prepare_cached(
                "INSERT INTO sessions (session_id, cwd, transcript_path, pane, last_hook_event, \
                 first_seen_ms, last_seen_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6) \
                 ON CONFLICT (session_id) DO UPDATE SET \
                 cwd = coalesce(excluded.cwd, cwd), \
                 transcript_path = coalesce(excluded.transcript_path, transcript_path), \
                 pane = coalesce(excluded.pane, pane), \
                 last_hook_event = coalesce(excluded.last_hook_event, last_hook_event), \
                 last_seen_ms = max(last_seen_ms, excluded.last_seen_ms)",
            )?
            .execute(params![
                s.session_id,
                s.cwd,
                s.transcript_path,
                s.pane,
                s.last_hook_event,
                s.seen_at_ms,
            ])?;
        }
        Record::Nudge(n) => {
            conn.prepare_cached(
                "INSERT INTO nudges (session_id, unanswered, last_nudge_ms, acknowledged) \
                 VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (session_id) DO UPDATE SET unanswered = excluded.unanswered, \
                 last_nudge_ms = excluded.last_nudge_ms, acknowledged = excluded.acknowledged",
            )?
            .execute(params![
                n.session_id,
                n.unanswered,
                n.last_nudge_ms,
                n.acknowledged
            ])?;
        }
        Record::Wake { session_id, at_ms } => {
            conn.prepare_cached(
                "INSERT INTO wakes (session_id, last_wake_ms) VALUES (?1, ?2) \
                 ON CONFLICT (session_id) DO UPDATE SET \
                 last_wake_ms = max(last_wake_ms, excluded.last_wake_ms)",
            )?
            .execute(params![session_id, at_ms])?;
        }
        Record::Pay {
            session_id,
            up_to_ms,
            how,
        } => {
            pay(conn, session_id, *up_to_ms, *how)?;
        }
        Record::Limited(seen) => upsert_limit(conn, seen)?,
        Record::ResumeTried { session_id, at_ms } => {
            conn.prepare_cached(
                "UPDATE limits SET tries = tries + 1, last_try_ms = ?2 WHERE session_id = ?1",
            )?
            .execute(params![session_id, at_ms])?;
        }
        Record::ResumeGaveUp { session_id } => {
            conn.prepare_cached("UPDATE limits SET gave_up = 1 WHERE session_id = ?1")?
                .execute(params![session_id])?;
        }
        Record::LimitLifted { session_id } => {
            conn.prepare_cached("DELETE FROM limits WHERE session_id = ?1")?
                .execute(params![session_id])?;
        }
        Record::Renamed {
            old_id,
            new_id,
            pane,
            at_ms,
        } => rename(conn, old_id, new_id, pane, *at_ms)?,
        Record::RewindAsked {
            session_id,
            why,
            at_ms,
        } => {
            conn.prepare_cached(
                "INSERT INTO rewinds (session_id, why, asked_ms) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (session_id) WHERE outcome IS NULL DO NOTHING",
            )?
            .execute(params![session_id, why.as_str(), at_ms])?;
        }
        Record::RewindEnded {
            session_id,
            outcome,
            new_id,
            detail,
            at_ms,
        } => {
            conn.prepare_cached(
                "UPDATE rewinds SET outcome = ?2, new_id = ?3, detail = ?4, done_ms = ?5 \
                 WHERE session_id = ?1 AND outcome IS NULL",
            )?
            .execute(params![session_id, outcome.as_str(), new_id, detail, at_ms])?;
        }
    }
    Ok(())
}

/// Records that `old_id` is now `new_id` in `pane`. The owed events and the limit are the
/// agent's, not the id's: they move to the new id, so its Stop hook pays them and its hold
/// stands. A rename back to an id the chain already holds (a pane re-mapped to its old id)
/// drops that id's alias, so the chain never loops.
fn rename(
    conn: &Connection,
    old_id: &str,
    new_id: &str,
    pane: &str,
    at_ms: i64,
) -> rusqlite::Result<()> {
    if old_id == new_id {
        return Ok(());
    }
    conn.prepare_cached("DELETE FROM aliases WHERE old_id = ?1")?
        .execute(params![new_id])?;
    conn.prepare_cached(
        "INSERT INTO aliases (old_id, new_id, pane, at_ms) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (old_id) DO UPDATE SET new_id = excluded.new_id, pane = excluded.pane, \
         at_ms = excluded.at_ms",
    )?
    .execute(params![old_id, new_id, pane, at_ms])?;
    conn.prepare_cached(
        "UPDATE deliveries SET target_session = ?2 WHERE target_session = ?1 AND owed = 1",
    )?
    .execute(params![old_id, new_id])?;
    conn.prepare_cached("UPDATE OR IGNORE limits SET session_id = ?2 WHERE session_id = ?1")?
        .execute(params![old_id, new_id])?;
    Ok(())
}

/// Records a limit seen. A notice with another reset than the one kept (a reset given, with
/// another text) is a new reset: after a resume that met the limit again the tries go on, and a
/// limit given up on starts a new series. The same notice read again changes nothing but how it
/// was last seen: a bare `3pm` re-read later must not move the reset first recorded. The same
/// limit seen with its reset to the second, where only the minute was kept, takes that reset
/// and nothing else: the most exact reset wins, whichever signal came first.
fn upsert_limit(conn: &Connection, seen: &LimitSeen) -> rusqlite::Result<()> {
    let kept: Option<(Option<String>, bool, bool)> = conn
        .prepare_cached(
            "SELECT resets_text, gave_up, resets_exact FROM limits WHERE session_id = ?1",
        )?
        .query_row(params![seen.session_id], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .optional()?;
    let Some((kept_text, gave_up, kept_exact)) = kept else {
        conn.prepare_cached(
            "INSERT INTO limits (session_id, kind, resets_text, resets_at_ms, resets_exact, \
             seen_how, since_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?
        .execute(params![
            seen.session_id,
            seen.kind,
            seen.resets_text,
            seen.resets_at_ms,
            seen.resets_exact,
            seen.how.as_str(),
            seen.at_ms,
        ])?;
        return Ok(());
    };
    let same_text = seen.resets_text.is_some() && seen.resets_text == kept_text;
    let new_reset = seen.resets_at_ms.is_some() && !same_text;
    let more_exact = same_text && seen.resets_exact && !kept_exact;
    let new_series = new_reset && gave_up;
    conn.prepare_cached(
        "UPDATE limits SET kind = ?2, seen_how = ?5, resets_text = coalesce(?3, resets_text), \
         resets_at_ms = iif(?7 OR ?9, ?4, resets_at_ms), \
         resets_exact = iif(?7 OR ?9, ?10, resets_exact), gave_up = iif(?7, 0, gave_up), \
         since_ms = iif(?8, ?6, since_ms), tries = iif(?8, 0, tries), \
         last_try_ms = iif(?8, NULL, last_try_ms) WHERE session_id = ?1",
    )?
    .execute(params![
        seen.session_id,
        seen.kind,
        seen.resets_text,
        seen.resets_at_ms,
        seen.how.as_str(),
        seen.at_ms,
        new_reset,
        new_series,
        more_exact,
        seen.resets_exact,
    ])?;
    Ok(())
}

/// `dropped` without the ids given up at a `/clear` for a session that stays: the bus may still
/// use such an id, and its rename (and its rewinds) are how it reaches that session.
fn still_named(conn: &Connection, dropped: Vec<String>) -> rusqlite::Result<Vec<String>> {
    let renamed: std::collections::HashMap<String, String> = conn
        .prepare_cached("SELECT old_id, new_id FROM aliases")?
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let gone: std::collections::HashSet<&str> = dropped.iter().map(String::as_str).collect();
    // The id at the end of `id`'s renames (the one its session goes by now) stays.
    let stays = |id: &str| {
        let mut at = id;
        // Bounded as `queries::successor` is: a loop in the table cannot hang the prune.
        for _ in 0..64 {
            match renamed.get(at) {
                Some(next) => at = next,
                None => break,
            }
        }
        at != id && !gone.contains(at)
    };
    Ok(dropped.iter().filter(|id| !stays(id)).cloned().collect())
}

/// Pays `session_id`'s owed events recorded up to `up_to_ms` and notes how; returns how many
/// were owed. One statement clears them, so two payers (the hook CLI and the daemon) can never
/// both pay the same events.
pub(crate) fn pay(
    conn: &Connection,
    session_id: &str,
    up_to_ms: i64,
    how: Payment,
) -> rusqlite::Result<u64> {
    let paid = conn
        .prepare_cached(
            "UPDATE deliveries SET owed = 0 \
             WHERE target_session = ?1 AND owed = 1 AND at_ms <= ?2",
        )?
        .execute(params![session_id, up_to_ms])? as u64;
    if paid > 0 {
        conn.prepare_cached(
            "INSERT INTO owed_payments (session_id, last_paid_ms, last_how, last_events, \
             by_hook, by_typing) VALUES (?1, ?2, ?3, ?4, ?3 = 'hook', ?3 = 'typed') \
             ON CONFLICT (session_id) DO UPDATE SET last_paid_ms = excluded.last_paid_ms, \
             last_how = excluded.last_how, last_events = excluded.last_events, \
             by_hook = by_hook + excluded.by_hook, by_typing = by_typing + excluded.by_typing",
        )?
        .execute(params![
            session_id,
            super::now_unix_ms(),
            how.as_str(),
            paid
        ])?;
    }
    Ok(paid)
}

/// Deletes up to `limit` deliveries older than `cutoff_ms`; returns how many. Owed events stay
/// until they are paid or their session is forgotten.
pub(crate) fn prune_deliveries(
    conn: &Connection,
    cutoff_ms: i64,
    limit: u32,
) -> rusqlite::Result<u64> {
    let mut sessions = std::collections::BTreeSet::new();
    let mut deleted = 0u64;
    {
        let mut stmt = conn.prepare_cached(
            "DELETE FROM deliveries WHERE id IN \
             (SELECT id FROM deliveries WHERE at_ms < ?1 AND owed = 0 ORDER BY at_ms LIMIT ?2) \
             RETURNING target_session",
        )?;
        let mut rows = stmt.query(params![cutoff_ms, limit])?;
        while let Some(row) = rows.next()? {
            sessions.insert(row.get::<_, String>(0)?);
            deleted += 1;
        }
    }
    // A session whose latest delivery went with them has none left in the ledger: forget it, so
    // the table does not grow with every session id ever seen. Only the sessions touched here
    // are looked at.
    for sid in &sessions {
        forget_latest_if_gone(conn, sid)?;
    }
    Ok(deleted)
}

/// Forgets sessions whose every trace (hook seen, wake, nudge, owed event, limit, rewind) is
/// older than `cutoff_ms`, except those in `keep` (still mapped to a pane): their rows in
/// `sessions`, `wakes`, `nudges`, `owed_payments`, `limits`, `rewinds` and `aliases` go, and
/// what they were owed is written off (pruned with the deliveries). Returns how many sessions were forgotten.
pub(crate) fn forget_sessions(
    conn: &Connection,
    cutoff_ms: i64,
    keep: &[String],
) -> rusqlite::Result<u64> {
    let keep = serde_json::to_string(keep).unwrap_or_else(|_| "[]".into());
    let dropped: Vec<String> = {
        let mut stmt = conn.prepare_cached(
            "SELECT session_id FROM ( \
                 SELECT session_id, last_seen_ms AS at FROM sessions \
                 UNION ALL SELECT session_id, last_wake_ms FROM wakes \
                 UNION ALL SELECT session_id, coalesce(last_nudge_ms, 0) FROM nudges \
                 UNION ALL SELECT target_session, at_ms FROM deliveries WHERE owed = 1 \
                 UNION ALL SELECT session_id, max(since_ms, coalesce(last_try_ms, 0)) FROM limits \
                 UNION ALL SELECT session_id, coalesce(done_ms, asked_ms) FROM rewinds) \
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

/// Forgets one session on an operator's word (`wakebridge forget`), whatever its age: the rows
/// [`forget_sessions`] removes, for `session_id` and every id it had before a `/clear` (they
/// are the same session: status lists them as one), and its latest-delivery row, so it leaves
/// `/sessions` (its deliveries stay until the identity window prunes them: a redelivered event
/// must still be known). Returns how many of those ids the ledger knew; 0 means none.
pub(crate) fn forget_session(conn: &Connection, session_id: &str) -> rusqlite::Result<u64> {
    let renamed: Vec<(String, String)> = conn
        .prepare_cached("SELECT old_id, new_id FROM aliases")?
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let ids = formerly_and_self(&renamed, session_id);
    let mut known = 0;
    {
        let mut stmt = conn.prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM sessions WHERE session_id = ?1 \
                 UNION ALL SELECT 1 FROM wakes WHERE session_id = ?1 \
                 UNION ALL SELECT 1 FROM nudges WHERE session_id = ?1 \
                 UNION ALL SELECT 1 FROM latest_deliveries WHERE session_id = ?1 \
                 UNION ALL SELECT 1 FROM owed_payments WHERE session_id = ?1 \
                 UNION ALL SELECT 1 FROM limits WHERE session_id = ?1 \
                 UNION ALL SELECT 1 FROM rewinds WHERE session_id = ?1 \
                 UNION ALL SELECT 1 FROM aliases WHERE old_id = ?1 OR new_id = ?1)",
        )?;
        for id in &ids {
            if stmt.query_row(params![id], |row| row.get::<_, bool>(0))? {
                known += 1;
            }
        }
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
    // Bounded as `queries::successor` is: a loop in the table cannot hang the forget.
    while at < ids.len() && ids.len() < 64 {
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

/// Removes every row naming one of `dropped` from the per-session tables and writes off what
/// they were owed.
fn forget_ids(conn: &Connection, dropped: &[String]) -> rusqlite::Result<()> {
    let mut statements = [
        "sessions",
        "wakes",
        "nudges",
        "owed_payments",
        "limits",
        "rewinds",
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
