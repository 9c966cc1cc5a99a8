-- wakebridge ledger, schema 2: per-session state that must survive a restart (the reference
-- bridge kept its cooldown in memory and lost it; see reference 10.24).

-- Last successful wake per session: the cooldown window is measured from here.
CREATE TABLE wakes (
    session_id   TEXT    PRIMARY KEY NOT NULL,
    last_wake_ms INTEGER NOT NULL
) STRICT;

-- Idle-nudger state per session: how many nudges went unanswered, when the last one was typed,
-- and whether the nudger has fallen silent (acknowledged idle) until the session shows life.
CREATE TABLE nudges (
    session_id    TEXT    PRIMARY KEY NOT NULL,
    unanswered    INTEGER NOT NULL CHECK (unanswered >= 0),
    last_nudge_ms INTEGER,
    acknowledged  INTEGER NOT NULL CHECK (acknowledged IN (0, 1))
) STRICT;
