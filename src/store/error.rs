//! `StoreError`: what went wrong with the ledger, each naming the file and what to do.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::ErrorCode;

/// What went wrong with the ledger, and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create the database directory {}: {source}; check its parent's permissions", dir.display())]
    CreateDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot create or open the database file {}: {source}; check the path and its permissions", path.display())]
    CreateFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the wakebridge database {} is corrupt or not a database ({source}); it was left \
         untouched: move it aside (e.g. `mv {} {}.corrupt`, with its -wal and -shm files) and start \
         again to get a fresh ledger",
        path.display(), path.display(), path.display()
    )]
    Corrupt {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error(
        "the wakebridge database {} is damaged (integrity check: {problems}); it was left \
         untouched: move it aside (e.g. `mv {} {}.corrupt`, with its -wal and -shm files) and start \
         again to get a fresh ledger",
        path.display(), path.display(), path.display()
    )]
    Damaged { path: PathBuf, problems: String },
    #[error(
        "{} is an SQLite database of another program (application_id {application_id}), not a \
         wakebridge ledger; it was left untouched: point wakebridge at another path or move the \
         file away",
        path.display()
    )]
    NotALedger { path: PathBuf, application_id: i32 },
    #[error(
        "the wakebridge database {} has schema version {found}, newer than this build knows \
         ({supported}); run the newer wakebridge, or move the file aside to start a fresh ledger",
        path.display()
    )]
    TooNew {
        path: PathBuf,
        found: i64,
        supported: usize,
    },
    #[error(
        "the wakebridge database {} cannot use WAL journaling (journal_mode stayed {mode:?}); \
         put it on a local filesystem",
        path.display()
    )]
    WalUnavailable { path: PathBuf, mode: String },
    #[error("cannot open the wakebridge database {}: {source}", path.display())]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("cannot migrate the wakebridge database {}: {source}; it was left at its previous schema", path.display())]
    Migrate {
        path: PathBuf,
        source: rusqlite_migration::Error,
    },
    #[error("cannot start the ledger writer thread: {0}")]
    SpawnWriter(std::io::Error),
    #[error("cannot make a scratch directory for a temporary ledger: {0}")]
    Scratch(std::io::Error),
    #[error("writing to the wakebridge database {} failed: {source}", path.display())]
    Write {
        path: PathBuf,
        source: Arc<rusqlite::Error>,
    },
    #[error("reading the wakebridge database {} failed: {source}", path.display())]
    Read {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("the ledger writer for {} has stopped; restart wakebridge", path.display())]
    WriterGone { path: PathBuf },
}

impl StoreError {
    pub(crate) fn write(path: &Path, source: rusqlite::Error) -> Self {
        Self::Write {
            path: path.to_path_buf(),
            source: Arc::new(source),
        }
    }

    /// A file that is not a database, or is damaged.
    pub(super) fn corrupt(source: &rusqlite::Error) -> bool {
        matches!(
            source.sqlite_error_code(),
            Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt)
        )
    }

    /// SQLite's "database is locked" or "busy": another connection held the file.
    pub(super) fn busy(&self) -> bool {
        let source = match self {
            Self::Open { source, .. } => source,
            Self::Migrate {
                source: rusqlite_migration::Error::RusqliteError { err, .. },
                ..
            } => err,
            _ => return false,
        };
        matches!(
            source.sqlite_error_code(),
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
        )
    }

    /// Open-time SQLite errors: a corrupt file gets the "move it aside" error.
    pub(super) fn at_open(path: &Path, source: rusqlite::Error) -> Self {
        let path = path.to_path_buf();
        if Self::corrupt(&source) {
            Self::Corrupt { path, source }
        } else {
            Self::Open { path, source }
        }
    }
}
