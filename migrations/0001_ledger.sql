-- wakebridge ledger, schema 1: what was delivered, and which sessions the hook has seen.
-- Times are unix milliseconds (wall clock), durations are microseconds.

-- Marks the file as a wakebridge ledger ('wakb'), so `Store::open` can refuse to migrate some
-- other program's SQLite database that happens to sit at the configured path.
PRAGMA application_id = 2002873186;

-- One row per outcome wakebridge produced: a webhook answered, a wake typed, a nudge, a
-- context warning. Rows are pruned after the identity retention window.
CREATE TABLE deliveries (
    id             INTEGER PRIMARY KEY,
    at_ms          INTEGER NOT NULL,
    source         TEXT    NOT NULL CHECK (source IN ('hook', 'wake', 'nudge', 'context')),
    -- Hex digest that makes a redelivered event recognisable; NULL when there is none.
    identity       TEXT,
    event_id       TEXT,
    sender         TEXT    NOT NULL,
    target_session TEXT    NOT NULL,
    action         TEXT    NOT NULL,
    spool_us       INTEGER CHECK (spool_us IS NULL OR spool_us >= 0),
    inject_us      INTEGER CHECK (inject_us IS NULL OR inject_us >= 0),
    error_kind     TEXT
) STRICT;

-- Pruning by age, and the time window of the start-up dedupe warm-up.
CREATE INDEX deliveries_by_time ON deliveries (at_ms);
-- Start-up dedupe warm-up: latest row per identity inside the window.
CREATE INDEX deliveries_by_identity ON deliveries (identity, at_ms) WHERE identity IS NOT NULL;
-- Last delivery per session for `status`.
CREATE INDEX deliveries_by_target ON deliveries (target_session, at_ms);

-- Sessions the `wakebridge hook` CLI has reported (Claude Code hooks), one row each.
CREATE TABLE sessions (
    session_id      TEXT    PRIMARY KEY NOT NULL,
    cwd             TEXT,
    transcript_path TEXT,
    pane            TEXT,
    last_hook_event TEXT,
    first_seen_ms   INTEGER NOT NULL,
    last_seen_ms    INTEGER NOT NULL
) STRICT;
