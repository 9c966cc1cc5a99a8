//! The ledger's schema and connection settings: the ordered migrations from `migrations/`, the
//! application id that marks a file as ours, and the pragmas every connection gets. It does not
//! open files or decide what an error means to the operator (that is `store::open`).

use std::sync::LazyLock;
use std::time::Duration;

use rusqlite::Connection;
use rusqlite_migration::{M, Migrations};

/// `PRAGMA application_id` of a wakebridge ledger: the ASCII bytes "wakb" read as a big-endian
/// integer. Set by migration 1; lets `open` tell our file from another program's database.
pub const APPLICATION_ID: i32 = 0x7761_6b62;

/// How long a connection waits for a lock held by another connection before failing with
/// SQLITE_BUSY. The `wakebridge hook` CLI writes to the same file from another process; every
/// wakebridge transaction lasts milliseconds, so 5 s only runs out when something is truly stuck.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Every schema step in order. Never edit a released step: add a new file instead, because
/// databases in the field are already at the older version and are only migrated forward.
static MIGRATIONS: LazyLock<Migrations<'static>> = LazyLock::new(|| {
    Migrations::new(vec![
        M::up(include_str!("../../migrations/0001_ledger.sql")),
        M::up(include_str!(
            "../../migrations/0002_wake_and_nudge_state.sql"
        )),
        M::up(include_str!("../../migrations/0003_no_identity_index.sql")),
        M::up(include_str!(
            "../../migrations/0004_latest_delivery_per_session.sql"
        )),
        M::up(include_str!("../../migrations/0005_spool_pending.sql")),
        M::up(include_str!("../../migrations/0006_owed_wakes.sql")),
        M::up(include_str!("../../migrations/0007_usage_limits.sql")),
        M::up(include_str!("../../migrations/0008_rewinds.sql")),
        M::up(include_str!("../../migrations/0009_exact_resets.sql")),
    ])
});

/// The migration set, applied by `Store::open`.
pub fn migrations() -> &'static Migrations<'static> {
    &MIGRATIONS
}

/// Number of schema versions this build knows; a file with a higher `user_version` was written
/// by a newer wakebridge.
pub fn latest_version() -> usize {
    // Kept in step with the list above by `latest_version_matches_migration_count`.
    9
}

/// Settings for the single writer connection.
///
/// WAL lets readers (status, the start-up warm-up, the hook CLI's reads) proceed while the
/// writer commits. `synchronous = NORMAL` in WAL mode skips the fsync at each commit but keeps
/// ordering: a committed transaction survives the process being killed (SIGKILL, OOM, panic)
/// because its pages are already in the WAL file in the kernel's page cache; only a host crash or
/// power loss can lose the last few commits. That is the right trade for a ledger written on
/// the webhook hot path. The one exception is a spool round (`Store::commit_round`): it is the
/// write-ahead record of spool lines, so its commit is followed by an fdatasync of the WAL (see
/// `writer::Wal`).
pub fn configure_writer(conn: &Connection) -> rusqlite::Result<String> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", true)?;
    Ok(mode)
}

/// Settings for read connections: same lock patience, foreign keys on for consistency.
pub fn configure_reader(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "foreign_keys", true)?;
    Ok(())
}

/// The `application_id` of a file that is somebody else's database, read before migrating;
/// `None` for ours or an empty (fresh) file. Fails with SQLITE_NOTADB on garbage.
pub fn foreign_application_id(conn: &Connection) -> rusqlite::Result<Option<i32>> {
    let application_id: i32 = conn.query_row("PRAGMA application_id", [], |row| row.get(0))?;
    let objects: i64 =
        conn.query_row("SELECT count(*) FROM sqlite_schema", [], |row| row.get(0))?;
    let ours_or_fresh = application_id == APPLICATION_ID || (application_id == 0 && objects == 0);
    Ok((!ours_or_fresh).then_some(application_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_valid() {
        assert!(migrations().validate().is_ok());
    }

    #[test]
    fn latest_version_matches_migration_count() {
        let mut conn = Connection::open_in_memory().expect("in-memory db");
        migrations().to_latest(&mut conn).expect("migrate");
        let version: usize = conn
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .expect("user_version");
        assert_eq!(version, latest_version());
    }

    #[test]
    fn migration_one_marks_the_file_as_ours() {
        let mut conn = Connection::open_in_memory().expect("in-memory db");
        assert_eq!(foreign_application_id(&conn).expect("identify"), None);
        migrations().to_version(&mut conn, 1).expect("migrate");
        let id: i32 = conn
            .query_row("PRAGMA application_id", [], |row| row.get(0))
            .expect("application_id");
        assert_eq!(id, APPLICATION_ID);
        assert_eq!(foreign_application_id(&conn).expect("identify"), None);
    }

    #[test]
    fn a_database_with_other_tables_is_foreign() {
        let conn = Connection::open_in_memory().expect("in-memory db");
        conn.execute_batch("CREATE TABLE t (x)").expect("create");
        assert_eq!(foreign_application_id(&conn).expect("identify"), Some(0));
    }
}
