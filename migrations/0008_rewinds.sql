-- wakebridge ledger, schema 8: rewinds, and the ids a session had before `/clear`.
-- `/clear` gives a Claude Code session a new id while the bus and the session's peers still
-- know the old one: `aliases` keeps, for each id given up in a pane, the id that took the pane
-- over, so a message to the old id still reaches the agent in that pane (for as long as the
-- newer id is the one mapped there).
CREATE TABLE aliases (
    old_id TEXT    PRIMARY KEY NOT NULL,
    new_id TEXT    NOT NULL,
    -- The pane both ids ran in (`tmux:%3`, `zellij:<session>:<pane>`).
    pane   TEXT    NOT NULL,
    at_ms  INTEGER NOT NULL
) STRICT;
CREATE INDEX aliases_by_new ON aliases (new_id);

-- Every rewind asked for or performed: a clean context window by `/clear` and a re-hydration
-- prompt, or a restart of the agent in its pane. A row without an outcome is still to do (at
-- most one per session); `session_id` is the id the session had when it was asked.
CREATE TABLE rewinds (
    id         INTEGER PRIMARY KEY,
    session_id TEXT    NOT NULL,
    why        TEXT    NOT NULL CHECK (why IN ('asked', 'auto', 'restart')),
    asked_ms   INTEGER NOT NULL,
    done_ms    INTEGER,
    outcome    TEXT    CHECK (outcome IN ('done', 'not-typed', 'failed', 'skipped')),
    -- The id the session has after it (a `/clear` or a restart starts a new one).
    new_id     TEXT,
    -- Why it was skipped or failed, in a few words.
    detail     TEXT
) STRICT;
CREATE UNIQUE INDEX rewinds_one_pending ON rewinds (session_id) WHERE outcome IS NULL;
