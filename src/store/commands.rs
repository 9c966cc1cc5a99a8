//! The commands other machines of the fleet sent this one, by id, so each runs once.

use rusqlite::params;

use super::{Store, StoreError};

impl Store {
    /// Notes command `id` as seen at `now_ms`; `false` when it was seen before. Ids seen before
    /// `forget_before_ms` are forgotten on the way (commands expire long before).
    pub async fn first_sight_of_command(
        &self,
        id: &str,
        now_ms: i64,
        forget_before_ms: i64,
    ) -> Result<bool, StoreError> {
        let id = id.to_owned();
        let added = self
            .write_rows(move |conn| {
                conn.prepare_cached("DELETE FROM fleet_commands WHERE seen_ms < ?1")?
                    .execute([forget_before_ms])?;
                let added = conn
                    .prepare_cached(
                        "INSERT OR IGNORE INTO fleet_commands (id, seen_ms) VALUES (?1, ?2)",
                    )?
                    .execute(params![id, now_ms])?;
                Ok(added as u64)
            })
            .await?;
        Ok(added == 1)
    }
}

#[cfg(test)]
mod tests {
    use crate::store::Store;

    #[tokio::test]
    async fn a_command_is_new_once_and_forgotten_after_its_day() {
        let store = Store::open_in_memory().unwrap();
        assert!(store.first_sight_of_command("c1", 1_000, 0).await.unwrap());
        assert!(!store.first_sight_of_command("c1", 2_000, 0).await.unwrap());
        assert!(store.first_sight_of_command("c2", 3_000, 0).await.unwrap());
        // Past c1's keeping, it is forgotten: new again.
        assert!(
            store
                .first_sight_of_command("c1", 9_000, 2_500)
                .await
                .unwrap()
        );
        assert!(
            !store
                .first_sight_of_command("c2", 9_500, 2_500)
                .await
                .unwrap()
        );
    }
}
