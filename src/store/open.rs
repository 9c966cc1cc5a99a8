//! Opening the ledger: directories and modes, the schema (the migrations from `migrations/` and
//! the application id that marks a file as ours), the writer connection (WAL, migrations,
//! refusing a corrupt or foreign file), the hook's single connection, and read-only connections.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use rusqlite_migration::{M, Migrations};

use super::StoreError;
use crate::deadline::Deadline;
use crate::private_fs;

/// `PRAGMA application_id` of a wakebridge ledger: "wakb", big-endian. Set by migration 1.
const APPLICATION_ID: i32 = 0x7761_6b62;

/// How long a connection waits for another's lock (the hook CLI writes from another process);
/// every transaction lasts milliseconds, so 5 s runs out only when something is stuck.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// The pause before opening again where SQLite answered "locked" without waiting.
const BUSY_RETRY: Duration = Duration::from_millis(10);

/// Every schema step in order. Never edit a released one (ledgers only migrate forward).
const STEPS: &[M<'static>] = &[
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
    M::up(include_str!("../../migrations/0013_told.sql")),
    M::up(include_str!("../../migrations/0014_claims.sql")),
    M::up(include_str!("../../migrations/0015_kept.sql")),
    M::up(include_str!("../../migrations/0016_fleet_commands.sql")),
    M::up(include_str!("../../migrations/0017_agent.sql")),
    M::up(include_str!("../../migrations/0018_samples.sql")),
];

static MIGRATIONS: Migrations<'static> = Migrations::from_slice(STEPS);

/// Schema versions this build knows; a higher `user_version` is a newer wakebridge's.
const LATEST_VERSION: usize = STEPS.len();

/// Creates the parent directories (0700) and the file (0600; SQLite gives -wal and -shm the same
/// mode) if missing. A symlinked ledger is followed, as SQLite does: its place is the user's.
pub(super) fn create_file(path: &Path) -> Result<(), StoreError> {
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        private_fs::create_dir(dir).map_err(|source| StoreError::CreateDir {
            dir: dir.to_path_buf(),
            source,
        })?;
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(private_fs::FILE_MODE)
        .open(path)
        .map(drop)
        .map_err(|source| StoreError::CreateFile {
            path: path.to_path_buf(),
            source,
        })
}

/// The write connection: checks the file is ours before changing it, WAL, then migrations.
/// Several first hooks can open a new ledger at once, and SQLite skips the busy handler where
/// waiting could deadlock (turning a new file to WAL, a read upgraded to a write): such a
/// "database is locked" is retried with a fresh connection until `BUSY_TIMEOUT`.
pub(super) fn open_writer(path: &Path) -> Result<Connection, StoreError> {
    let deadline = Deadline::after(BUSY_TIMEOUT);
    loop {
        match try_open_writer(path) {
            Err(e) if e.busy() && !deadline.expired() => std::thread::sleep(BUSY_RETRY),
            opened => return opened,
        }
    }
}

fn try_open_writer(path: &Path) -> Result<Connection, StoreError> {
    let at_open = |source| StoreError::at_open(path, source);
    let mut conn = Connection::open(path).map_err(at_open)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(at_open)?;
    if let Some(application_id) = foreign_application_id(&conn).map_err(at_open)? {
        return Err(StoreError::NotALedger {
            path: path.to_path_buf(),
            application_id,
        });
    }
    let found: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(at_open)?;
    let supported = LATEST_VERSION;
    if usize::try_from(found).map_or(true, |found| found > supported) {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found,
            supported,
        });
    }
    // WAL, so readers proceed while it commits. `synchronous = NORMAL` skips the fsync per
    // commit: a commit survives the process being killed (its pages are in the page cache), only
    // a host crash can lose the last few, the right trade on the hot path. A spool round's commit
    // is fdatasynced (`writer::Wal`): it is the spool's write-ahead record.
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
        .map_err(at_open)?;
    conn.pragma_update(None, "synchronous", "NORMAL")
        .and_then(|()| conn.pragma_update(None, "foreign_keys", true))
        .map_err(at_open)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::WalUnavailable {
            path: path.to_path_buf(),
            mode,
        });
    }
    if let Err(source) = MIGRATIONS.to_latest(&mut conn) {
        // Another process (the hook CLI) may have migrated the same file at the same moment
        // (rusqlite_migration reads the version before its transaction): its success is ours.
        let migrated_meanwhile = MIGRATIONS
            .pending_migrations(&conn)
            .is_ok_and(|pending| pending == 0);
        if !migrated_meanwhile {
            return Err(migrate_error(path, source));
        }
    }
    check_integrity(&conn, path)?;
    Ok(conn)
}

fn migrate_error(path: &Path, source: rusqlite_migration::Error) -> StoreError {
    match source {
        rusqlite_migration::Error::RusqliteError { err, .. } if StoreError::corrupt(&err) => {
            StoreError::at_open(path, err)
        }
        source => StoreError::Migrate {
            path: path.to_path_buf(),
            source,
        },
    }
}

/// `PRAGMA quick_check` at start-up, when refusing is cheap and clear, instead of failed writes
/// later; on a ledger pruned to a day of deliveries it takes milliseconds.
fn check_integrity(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    const PROBLEMS_SHOWN: u32 = 3;
    let problems = conn
        .prepare(&format!("PRAGMA quick_check({PROBLEMS_SHOWN})"))
        .and_then(|mut stmt| {
            stmt.query_map([], |row| row.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<String>>>()
        })
        .map_err(|source| StoreError::at_open(path, source))?;
    if problems.len() == 1 && problems[0] == "ok" {
        return Ok(());
    }
    Err(StoreError::Damaged {
        path: path.to_path_buf(),
        problems: problems.join("; ").replace('\n', " "),
    })
}

/// A connection for one quick write to an existing ledger of this schema, else `None`.
pub(super) fn open_current(path: &Path) -> Option<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .ok()?;
    conn.busy_timeout(BUSY_TIMEOUT).ok()?;
    let (application_id, version): (i32, i64) = conn
        .query_row(
            "SELECT application_id, user_version FROM pragma_application_id, pragma_user_version",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .ok()?;
    let current = application_id == APPLICATION_ID
        && usize::try_from(version).is_ok_and(|v| v == LATEST_VERSION);
    if !current {
        return None;
    }
    conn.pragma_update(None, "synchronous", "NORMAL").ok()?;
    // Without a daemon, closing would checkpoint and delete the WAL (two fsyncs) and the next
    // hook create a new one: per tool call. The daemon checkpoints as usual.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
        true,
    )
    .ok()?;
    Some(conn)
}

/// Read connections are opened read-only: a bug in a query can never write.
pub(super) fn open_reader(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "foreign_keys", true)?;
    Ok(conn)
}

/// Another program's `application_id`; `None` for ours or an empty file. SQLITE_NOTADB on garbage.
fn foreign_application_id(conn: &Connection) -> rusqlite::Result<Option<i32>> {
    // One statement, one snapshot: read apart, another process's first migration could commit
    // between the two and its tables show without its mark.
    let (application_id, objects): (i32, i64) = conn.query_row(
        "SELECT application_id, (SELECT count(*) FROM sqlite_schema) FROM pragma_application_id",
        [],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    let ours_or_fresh = application_id == APPLICATION_ID || (application_id == 0 && objects == 0);
    Ok((!ours_or_fresh).then_some(application_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_valid() {
        assert!(MIGRATIONS.validate().is_ok());
    }

    #[test]
    fn latest_version_matches_migration_count() {
        let mut conn = Connection::open_in_memory().expect("in-memory db");
        MIGRATIONS.to_latest(&mut conn).expect("migrate");
        let version: usize = conn
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .expect("user_version");
        assert_eq!(version, LATEST_VERSION);
    }

    #[test]
    fn migration_one_marks_the_file_as_ours() {
        let mut conn = Connection::open_in_memory().expect("in-memory db");
        assert_eq!(foreign_application_id(&conn).expect("identify"), None);
        MIGRATIONS.to_version(&mut conn, 1).expect("migrate");
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
