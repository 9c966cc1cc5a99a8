-- wakebridge ledger, schema 5: the ledger is the spool's write-ahead record.
-- Each round of spool appends is committed here (with an fsync) before the lines are written to
-- the session files: one row per round with every session's bytes and where they go, in the
-- same transaction as the delivery rows that carry the events' identities. So a line that reached a
-- spool file always has its identity in the ledger (a redelivery after any crash is recognised),
-- and whatever a crash cut from a file is put back from here at the next start. Rows are
-- deleted once their session files are fsynced (about once a second).
CREATE TABLE spool_pending (
    id       INTEGER PRIMARY KEY,
    -- The wake dir (canonical path) the round was written to: daemons on different wake dirs
    -- may share one ledger, and each replays only its own.
    wake_dir TEXT    NOT NULL,
    -- One entry per session, as a JSON array of [session_id, inode, file_offset, start, length]:
    -- the session file by inode (a drainer may rename it; device numbers change across boots),
    -- where its bytes go, and where they are in `bytes`.
    shares   TEXT    NOT NULL,
    bytes    BLOB    NOT NULL
) STRICT;

-- The latest delivery per session is kept by the writer, once per session per commit: the
-- trigger of schema 4 upserted it for every row, so a round of a busy session's lines rewrote
-- the same row (and page) once per line.
DROP TRIGGER deliveries_keep_latest;
