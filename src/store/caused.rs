//! What wakebridge's own texts cost: one row per turn one of them started (written by the
//! session loop once the turn ended), read back as today's figures and the totals by kind.

use std::collections::{BTreeMap, HashMap};

use rusqlite::{Connection, params};

use super::records::{exec, pairs};
use super::{Store, StoreError};
use crate::api::{TextKind, Today};

/// A turn one of wakebridge's texts started (upsert by session and prompt; never shrinks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caused {
    pub session_id: String,
    /// The prompt record's uuid in the transcript.
    pub prompt_id: String,
    pub kind: TextKind,
    /// When the turn ended.
    pub at_ms: i64,
    pub tokens: u64,
    pub tools: u32,
}

pub(super) fn apply(conn: &Connection, caused: &Caused) -> rusqlite::Result<usize> {
    // A turn read again (its transcript grew, or after a restart) only grows: the totals are
    // counters, and its kind stays what it was first read as.
    exec(
        conn,
        "INSERT INTO caused (session_id, prompt_id, kind, at_ms, tokens, tools) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (session_id, prompt_id) DO UPDATE SET \
         tokens = max(tokens, excluded.tokens), tools = max(tools, excluded.tools)",
        params![
            caused.session_id,
            caused.prompt_id,
            <&str>::from(caused.kind),
            caused.at_ms,
            i64::try_from(caused.tokens).unwrap_or(i64::MAX),
            caused.tools,
        ],
    )
}

impl Store {
    /// Tokens caused by kind since the ledger began, every kind present (at 0 when none).
    pub fn caused_totals(&self) -> Result<BTreeMap<TextKind, u64>, StoreError> {
        let sql = "SELECT kind, sum(tokens) FROM caused GROUP BY kind";
        let sums: Vec<(String, i64)> = self.read(|conn| pairs(conn, sql, []))?;
        let mut totals: BTreeMap<TextKind, u64> = <TextKind as strum::IntoEnumIterator>::iter()
            .map(|k| (k, 0))
            .collect();
        for (kind, tokens) in sums {
            // The table's CHECK admits only the kinds; an unknown word cannot be read back.
            let kind = kind.parse().unwrap_or(TextKind::Wake);
            totals.insert(kind, u64::try_from(tokens).unwrap_or(0));
        }
        Ok(totals)
    }

    /// Per session, when `sender`'s last text went in (typed or sent).
    pub fn last_deliveries_from(&self, sender: &str) -> Result<HashMap<String, i64>, StoreError> {
        let sql = "SELECT target_session, max(at_ms) FROM deliveries WHERE sender = ?1 \
                   AND action IN ('tmux', 'zellij', 'inbox') GROUP BY target_session";
        self.read(|conn| pairs(conn, sql, params![sender]))
    }

    /// Since `since_ms`: nudges typed or sent (budget nudges too), and the tokens every kind
    /// of text caused.
    pub fn today(&self, since_ms: i64) -> Result<Today, StoreError> {
        let sql = "SELECT (SELECT count(*) FROM deliveries WHERE at_ms >= ?1 AND source = 'nudge' \
                   AND action IN ('tmux', 'zellij', 'inbox')), \
                   (SELECT coalesce(sum(tokens), 0) FROM caused WHERE at_ms >= ?1)";
        let (nudges, tokens): (i64, i64) = self.read(|conn| {
            let mut stmt = conn.prepare_cached(sql)?;
            stmt.query_row(params![since_ms], |row| Ok((row.get(0)?, row.get(1)?)))
        })?;
        Ok(Today {
            nudges: u64::try_from(nudges).unwrap_or(0),
            caused_tokens: u64::try_from(tokens).unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Record;

    fn turn(
        sid: &str,
        prompt: &str,
        kind: TextKind,
        at_ms: i64,
        tokens: u64,
        tools: u32,
    ) -> Record {
        Record::Caused(Caused {
            session_id: sid.into(),
            prompt_id: prompt.into(),
            kind,
            at_ms,
            tokens,
            tools,
        })
    }

    #[tokio::test]
    async fn turns_add_up_by_kind_and_day_and_a_turn_read_again_only_grows() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("ledger.db")).unwrap();
        store
            .record_all(vec![
                turn("s1", "p1", TextKind::Nudge, 1_000, 500, 0),
                turn("s1", "p1", TextKind::Nudge, 2_000, 700, 1),
                turn("s1", "p1", TextKind::Wake, 2_500, 600, 0),
                turn("s1", "p2", TextKind::Wake, 3_000, 40, 2),
                turn("s2", "p1", TextKind::Budget, 500, 9, 0),
            ])
            .await
            .unwrap();
        let totals = store.caused_totals().unwrap();
        assert_eq!(totals[&TextKind::Nudge], 700);
        assert_eq!(totals[&TextKind::Wake], 40);
        assert_eq!(totals[&TextKind::Resume], 0);
        assert_eq!(totals.len(), 6);
        assert_eq!(store.today(1_000).unwrap().caused_tokens, 740);
    }
}
