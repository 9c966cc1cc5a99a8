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

    /// The samples since `from_ms`, oldest first, one per series and `bucket_ms` (the highest
    /// in it, at its start): a week of minutes would be ten thousand points a line.
    pub fn samples_since(&self, from_ms: i64, bucket_ms: i64) -> Result<Vec<Sample>, StoreError> {
        let sql = "SELECT at_ms / ?2 * ?2 AS bucket, kind, key, max(value) FROM samples \
                   WHERE at_ms >= ?1 GROUP BY bucket, kind, key ORDER BY bucket";
        self.read(|conn| {
            let mut statement = conn.prepare_cached(sql)?;
            let rows = statement.query_map(params![from_ms, bucket_ms.max(1)], |row| {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Caused, Record};

    fn context(at_ms: i64, key: &str, value: f64) -> Sample {
        let key = key.to_owned();
        let kind = HistoryKind::Context;
        Sample {
            at_ms,
            kind,
            key,
            value,
        }
    }

    #[tokio::test]
    async fn samples_come_back_by_stretch_at_their_highest_and_go_when_old() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("ledger.db")).unwrap();
        let minute = 60_000;
        let week = (0..4).map(|m| context(m * minute, "s1", m as f64 * 10.0));
        let mut samples: Vec<Sample> = week.collect();
        samples.push(context(0, "s2", 5.0));
        // The same instant read again replaces the first reading.
        samples.push(context(3 * minute, "s1", 35.0));
        store.record_samples(samples).await.unwrap();

        let each = store.samples_since(0, minute).unwrap();
        let s1: Vec<f64> = (each.iter())
            .filter(|s| s.key == "s1")
            .map(|s| s.value)
            .collect();
        assert_eq!(s1, [0.0, 10.0, 20.0, 35.0]);
        // Two minutes a stretch: the highest of each, at the stretch's start.
        let paired = store.samples_since(0, 2 * minute).unwrap();
        let s1: Vec<(i64, f64)> = (paired.iter())
            .filter(|s| s.key == "s1")
            .map(|s| (s.at_ms, s.value))
            .collect();
        assert_eq!(s1, [(0, 10.0), (2 * minute, 35.0)]);
        assert_eq!(store.samples_since(2 * minute, minute).unwrap().len(), 2);

        assert_eq!(store.prune_samples_before(2 * minute).await.unwrap(), 3);
        let left = store.samples_since(0, minute).unwrap();
        assert_eq!(left.iter().map(|s| s.at_ms).min(), Some(2 * minute));
    }

    #[tokio::test]
    async fn texts_are_counted_by_hour_and_kind_with_their_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("ledger.db")).unwrap();
        let turn = |prompt: &str, kind, at_ms, tokens| {
            let (session_id, prompt_id) = ("s1".to_owned(), prompt.to_owned());
            let tools = 0;
            Record::Caused(Caused {
                session_id,
                prompt_id,
                kind,
                at_ms,
                tokens,
                tools,
            })
        };
        store
            .record_all(vec![
                turn("a", TextKind::Nudge, HOUR_MS + 5, 100),
                turn("b", TextKind::Nudge, 2 * HOUR_MS - 1, 50),
                turn("c", TextKind::Wake, HOUR_MS + 9, 7),
                turn("d", TextKind::Nudge, 2 * HOUR_MS, 1),
                turn("e", TextKind::Nudge, 10, 1_000),
            ])
            .await
            .unwrap();
        let hours = store.texts_by_hour(HOUR_MS).unwrap();
        let row = |hour_ms, kind, texts, tokens| HourOfTexts {
            hour_ms,
            kind,
            texts,
            tokens,
        };
        assert_eq!(
            hours,
            [
                row(HOUR_MS, TextKind::Nudge, 2, 150),
                row(HOUR_MS, TextKind::Wake, 1, 7),
                row(2 * HOUR_MS, TextKind::Nudge, 1, 1),
            ]
        );
    }
}
