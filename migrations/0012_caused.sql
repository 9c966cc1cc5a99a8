-- wakebridge ledger, schema 12: what wakebridge's own texts cost. One row per turn one of them
-- started (a nudge, a wake, a warning...), written by the daemon from the session's transcript
-- once the turn ended: every token of the turn's API calls and how many tools it called. A
-- later reading of the same turn only raises its figures. Never pruned: the totals are counters, and a
-- row is a few dozen bytes per turn wakebridge started.
CREATE TABLE caused (
    session_id TEXT    NOT NULL,
    prompt_id  TEXT    NOT NULL,
    kind       TEXT    NOT NULL
        CHECK (kind IN ('wake', 'nudge', 'budget', 'warning', 'resume', 'rewind')),
    at_ms      INTEGER NOT NULL,
    tokens     INTEGER NOT NULL CHECK (tokens >= 0),
    tools      INTEGER NOT NULL CHECK (tools >= 0),
    PRIMARY KEY (session_id, prompt_id)
) STRICT;

-- Today's figures.
CREATE INDEX caused_by_time ON caused (at_ms);
