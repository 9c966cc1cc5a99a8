//! Usage limits as the ledger keeps them: a limit as one signal reported it, and the upsert that
//! keeps each session's tries and its most exact reset.

use rusqlite::{Connection, OptionalExtension, params};

use super::records::{LimitSource, exec};
use crate::reading::limit::{Notice, WRITTEN_EARLIER, WRITTEN_NOW};

/// A usage limit as one signal reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitSeen {
    pub session_id: String,
    /// `session limit`, `weekly limit`, ...
    pub kind: String,
    /// As Claude Code wrote it.
    pub resets_text: Option<String>,
    pub resets_at_ms: Option<i64>,
    /// `resets_at_ms` is to the second (a transcript record's `resetsAt`, the status line's
    /// `rate_limits`), not read from a notice's minute.
    pub resets_exact: bool,
    pub how: LimitSource,
    pub at_ms: i64,
}

impl LimitSeen {
    /// `notice`, seen `how` at `now_ms`, its reset read in this machine's zone
    /// (`Notice::lifts_by_ms`). `written_now`: not a screen notice that may be older
    /// ([`WRITTEN_EARLIER`]), but a hook, a transcript record, the screen right after a resume.
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

    /// This limit with its reset to the second, where known, instead of the notice's minute.
    pub fn with_exact_reset(mut self, exact_ms: Option<i64>) -> Self {
        if let Some(at) = exact_ms {
            self.resets_at_ms = Some(at);
            self.resets_exact = true;
        }
        self
    }
}

/// Records a limit seen. Another reset text is a new reset: the tries go on, and a limit given
/// up on starts a new series. The same notice re-read changes only how it was seen (a bare
/// `3pm` re-read later must not move the reset). A reset to the second replaces a kept minute:
/// the most exact reset wins, whichever signal came first.
pub(super) fn upsert(conn: &Connection, seen: &LimitSeen) -> rusqlite::Result<usize> {
    let kept: Option<(Option<String>, bool, bool)> = conn
        .prepare_cached(
            "SELECT resets_text, gave_up, resets_exact FROM limits WHERE session_id = ?1",
        )?
        .query_row(params![seen.session_id], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .optional()?;
    let Some((kept_text, gave_up, kept_exact)) = kept else {
        return exec(
            conn,
            "INSERT INTO limits (session_id, kind, resets_text, resets_at_ms, resets_exact, \
             seen_how, since_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                seen.session_id,
                seen.kind,
                seen.resets_text,
                seen.resets_at_ms,
                seen.resets_exact,
                seen.how.as_str(),
                seen.at_ms,
            ],
        );
    };
    let same_text = seen.resets_text.is_some() && seen.resets_text == kept_text;
    let new_reset = seen.resets_at_ms.is_some() && !same_text;
    let more_exact = same_text && seen.resets_exact && !kept_exact;
    let new_series = new_reset && gave_up;
    exec(
        conn,
        "UPDATE limits SET kind = ?2, seen_how = ?5, resets_text = coalesce(?3, resets_text), \
         resets_at_ms = iif(?7 OR ?9, ?4, resets_at_ms), \
         resets_exact = iif(?7 OR ?9, ?10, resets_exact), gave_up = iif(?7, 0, gave_up), \
         since_ms = iif(?8, ?6, since_ms), tries = iif(?8, 0, tries), \
         last_try_ms = iif(?8, NULL, last_try_ms) WHERE session_id = ?1",
        params![
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
        ],
    )
}
