-- wakebridge ledger, schema 6: owed wakes.
-- A bus event whose wake was not typed and submitted (a turn running, a draft or a menu at the
-- prompt, the cooldown, a multiplexer failure, an Enter that did not submit) is owed: its
-- delivery row has `owed = 1` until a wake pays it, so what is owed survives restarts. A wake
-- typed and submitted pays every owed row of its session up to that moment; so does a Stop
-- hook that keeps Claude Code going with the wake prompt.
ALTER TABLE deliveries ADD COLUMN owed INTEGER NOT NULL DEFAULT 0 CHECK (owed IN (0, 1));

-- Owed rows are few and read on every nudger poll: a partial index holds only them.
CREATE INDEX deliveries_owed ON deliveries (target_session, at_ms) WHERE owed = 1;

-- How each session's owed wakes were paid: the last payment, and how many by each path.
CREATE TABLE owed_payments (
    session_id   TEXT    PRIMARY KEY NOT NULL,
    last_paid_ms INTEGER NOT NULL,
    last_how     TEXT    NOT NULL CHECK (last_how IN ('hook', 'typed')),
    last_events  INTEGER NOT NULL CHECK (last_events > 0),
    by_hook      INTEGER NOT NULL DEFAULT 0 CHECK (by_hook >= 0),
    by_typing    INTEGER NOT NULL DEFAULT 0 CHECK (by_typing >= 0)
) STRICT;
