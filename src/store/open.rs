//! Opening the ledger: directories and modes, the writer connection (WAL, migrations, refusing
//! a corrupt or foreign file), the hook's single connection, and read-only connections.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use super::StoreError;
use super::schema::{self, APPLICATION_ID, BUSY_TIMEOUT};
use crate::private_fs;

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
pub(super) fn open_writer(path: &Path) -> Result<Connection, StoreError> {
    let at_open = |source| StoreError::at_open(path, source);
    let mut conn = Connection::open(path).map_err(at_open)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(at_open)?;
    if let Some(application_id) = schema::foreign_application_id(&conn).map_err(at_open)? {
        return Err(StoreError::NotALedger {
            path: path.to_path_buf(),
            application_id,
        });
    }
    let found: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(at_open)?;
    let supported = schema::latest_version();
    if usize::try_from(found).map_or(true, |found| found > supported) {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found,
            supported,
        });
    }
    let mode = schema::configure_writer(&conn).map_err(at_open)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::WalUnavailable {
            path: path.to_path_buf(),
            mode,
        });
    }
    if let Err(source) = schema::migrations().to_latest(&mut conn) {
        // Another process (the hook CLI) may have migrated the same file at the same moment;
        // its success is ours too.
        let migrated_meanwhile = schema::migrations()
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
        && usize::try_from(version).is_ok_and(|v| v == schema::latest_version());
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
    schema::configure_reader(&conn)?;
    Ok(conn)
}
