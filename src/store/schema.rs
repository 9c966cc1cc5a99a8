//! The ledger's schema and connection settings: the migrations from `migrations/`, the
//! application id that marks a file as ours, and every connection's pragmas.

use std::sync::LazyLock;
use std::time::Duration;

use rusqlite::Connection;
use rusqlite_migration::{M, Migrations};

/// `PRAGMA application_id` of a wakebridge ledger: "wakb", big-endian. Set by migration 1.
pub const APPLICATION_ID: i32 = 0x7761_6b62;

/// How long a connection waits for another's lock (the hook CLI writes from another process);
/// every transaction lasts milliseconds, so 5 s runs out only when something is stuck.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Every schema step in order. Never edit a released one (ledgers only migrate forward).
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
        M::up(include_str!("../../migrations/0010_inboxes.sql")),
        M::up(include_str!("../../migrations/0011_pauses.sql")),
        M::up(include_str!("../../migrations/0012_caused.sql")),
    ])
});

pub fn migrations() -> &'static Migrations<'static> {
    &MIGRATIONS
}

/// Schema versions this build knows; a higher `user_version` is a newer wakebridge's.
pub fn latest_version() -> usize {
    // Kept in step with the list above by `latest_version_matches_migration_count`.
    12
}

/// The writer connection: WAL, so readers proceed while it commits. `synchronous = NORMAL`
/// skips the fsync per commit: a commit survives the process being killed (its pages are in
/// the page cache), only a host crash can lose the last few, the right trade on the hot path.
/// A spool round's commit is fdatasynced (`writer::Wal`): it is the spool's write-ahead record.
pub fn configure_writer(conn: &Connection) -> rusqlite::Result<String> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", true)?;
    Ok(mode)
}

/// Read connections: the same lock patience and foreign keys.
pub fn configure_reader(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "foreign_keys", true)?;
    Ok(())
}

/// Another program's `application_id`; `None` for ours or an empty file. SQLITE_NOTADB on garbage.
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
