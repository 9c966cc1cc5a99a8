-- wakebridge ledger, schema 7: usage limits.
-- A session that hit a Claude Code usage limit is held (nothing typed, nothing nudged) until the
-- limit lifts; the row says which limit, when it resets (wall clock, so it survives restarts and
-- a laptop's sleep), how it was seen, and how the resume at the reset went. The row goes when
-- the session shows it works again (a tool call, a turn that ends normally, Claude Code's own
-- auto-resume) or the limit is no longer on its screen.
CREATE TABLE limits (
    session_id   TEXT    PRIMARY KEY NOT NULL,
    kind         TEXT    NOT NULL,
    -- The reset as Claude Code wrote it ('3pm (Europe/London)'); NULL when it gave none.
    resets_text  TEXT,
    -- The reset in unix ms; NULL when not known (a spend limit, a time that did not parse).
    resets_at_ms INTEGER,
    seen_how     TEXT    NOT NULL CHECK (seen_how IN ('screen', 'transcript', 'hook', 'statusline')),
    since_ms     INTEGER NOT NULL,
    -- Resume messages typed for this limit so far, and when the last one was.
    tries        INTEGER NOT NULL DEFAULT 0 CHECK (tries >= 0),
    last_try_ms  INTEGER,
    -- Set once the tries ran out: held, never typed into again until the session shows life.
    gave_up      INTEGER NOT NULL DEFAULT 0 CHECK (gave_up IN (0, 1))
) STRICT;
