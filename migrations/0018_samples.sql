-- wakebridge ledger, schema 18: the page's history. One sample a minute (`[page]
-- sample_interval`) of each session's context share and each account's window use, in percent;
-- pruned after `[page] history` (a week) by the pruning round. Keyed by time first: the page
-- reads the last day or week, and pruning drops the oldest.
CREATE TABLE samples (
    at_ms INTEGER NOT NULL,
    kind  TEXT    NOT NULL CHECK (kind IN ('context', 'five-hour', 'seven-day')),
    -- A session's id (context) or an account's name (its windows).
    key   TEXT    NOT NULL,
    value REAL    NOT NULL,
    PRIMARY KEY (at_ms, kind, key)
) STRICT, WITHOUT ROWID;
