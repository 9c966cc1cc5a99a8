//! The page's history: each session's context share and each account's window use, one sample
//! a minute (`[page] sample_interval`), kept for `[page] history`; and wakebridge's own texts per
//! hour with the tokens they caused, read from `caused`.

use rusqlite::{Connection, params};

use super::{Store, StoreError};
use crate::api::{HistoryKind, TextKind};

/// One reading, in percent.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub at_ms: i64,
    pub kind: HistoryKind,
    /// The session's id (context) or the account's name (its windows).
    pub key: String,
    pub value: f64,
}

/// Wakebridge's texts of one kind in one hour, and what their turns cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HourOfTexts {
    /// The hour's start (unix ms).
    pub hour_ms: i64,
    pub kind: TextKind,
    pub texts: u64,
    pub tokens: u64,
}

const HOUR_MS: i64 = 3_600_000;

impl Store {
    /// Records `samples` (a second reading of the same instant replaces the first).
    pub async fn record_samples(&self, samples: Vec<Sample>) -> Result<u64, StoreError> {
        self.write_rows(move |conn| insert(conn, &samples)).await
    }

    /// Every sample since `from_ms`, oldest first.
    pub fn samples_since(&self, from_ms: i64) -> Result<Vec<Sample>, StoreError> {
        let sql = "SELECT at_ms, kind, key, value FROM samples WHERE at_ms >= ?1 ORDER BY at_ms";
        self.read(|conn| {
            let mut statement = conn.prepare_cached(sql)?;
            let rows = statement.query_map([from_ms], |row| {
                let kind: String = row.get(1)?;
                Ok(Sample {
                    at_ms: row.get(0)?,
                    // The table's CHECK admits only the kinds.
                    kind: kind.parse().unwrap_or(HistoryKind::Context),
                    key: row.get(2)?,
                    value: row.get(3)?,
                })
            })?;
            rows.collect()
        })
    }

    /// Wakebridge's texts whose turns ended since `from_ms`, by hour and kind.
    pub fn texts_by_hour(&self, from_ms: i64) -> Result<Vec<HourOfTexts>, StoreError> {
        let sql = "SELECT at_ms / ?2 * ?2 AS hour, kind, count(*), sum(tokens) FROM caused \
                   WHERE at_ms >= ?1 GROUP BY hour, kind ORDER BY hour, kind";
        self.read(|conn| {
            let mut statement = conn.prepare_cached(sql)?;
            let rows = statement.query_map(params![from_ms, HOUR_MS], |row| {
                let kind: String = row.get(1)?;
                Ok(HourOfTexts {
                    hour_ms: row.get(0)?,
                    kind: kind.parse().unwrap_or(TextKind::Wake),
                    texts: row.get::<_, i64>(2)?.try_into().unwrap_or(0),
                    tokens: row.get::<_, i64>(3)?.try_into().unwrap_or(0),
                })
            })?;
            rows.collect()
        })
    }

    /// Drops the samples older than `cutoff_ms`; how many went.
    pub async fn prune_samples_before(&self, cutoff_ms: i64) -> Result<u64, StoreError> {
        self.write_rows(move |conn| {
            conn.prepare_cached("DELETE FROM samples WHERE at_ms < ?1")?
                .execute([cutoff_ms])
                .map(|n| n as u64)
        })
        .await
    }
}

fn insert(conn: &Connection, samples: &[Sample]) -> rusqlite::Result<u64> {
    let mut statement = conn.prepare_cached(
        "INSERT OR REPLACE INTO samples (at_ms, kind, key, value) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for sample in samples {
        let kind: &str = sample.kind.into();
        statement.execute(params![sample.at_ms, kind, sample.key, sample.value])?;
    }
    Ok(samples.len() as u64)
}
