-- wakebridge ledger, schema 11: a person's pause. A paused session gets nothing from wakebridge
-- (no wake, nudge, warning, resume or rewind; its Stop hook pays nothing) until it is unpaused
-- or `until_ms` passes; its bus events are spooled and owed meanwhile. The id '*' pauses every
-- session.
CREATE TABLE pauses (
    session_id TEXT    PRIMARY KEY NOT NULL,
    since_ms   INTEGER NOT NULL,
    until_ms   INTEGER
) STRICT;
