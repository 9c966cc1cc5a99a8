-- wakebridge ledger, schema 10: each session's inbox (Claude Code 2.1.224+).
-- Where its SessionStart hook said the session's inbox socket is; the newest message sent there
-- (its digest and when the send began); the newest prompt its UserPromptSubmit hook reported
-- (digest, time). The two are written by different processes in either order, so whichever
-- comes second sets `sent_heard_ms`: the newest message was heard when the digests match and
-- the prompt came after the send began, and a later prompt does not undo that. The token only
-- classifies the sender; it is never shown or logged.
CREATE TABLE inboxes (
    session_id TEXT PRIMARY KEY,
    socket TEXT,
    token TEXT,
    pid INTEGER,
    seen_ms INTEGER,
    sent_digest TEXT,
    sent_ms INTEGER,
    heard_digest TEXT,
    heard_ms INTEGER,
    sent_heard_ms INTEGER
);

-- A wake the inbox took pays what is owed like a typed one: a third way to pay, counted apart.
CREATE TABLE owed_payments_10 (
    session_id   TEXT    PRIMARY KEY NOT NULL,
    last_paid_ms INTEGER NOT NULL,
    last_how     TEXT    NOT NULL CHECK (last_how IN ('hook', 'typed', 'inbox')),
    last_events  INTEGER NOT NULL CHECK (last_events > 0),
    by_hook      INTEGER NOT NULL DEFAULT 0 CHECK (by_hook >= 0),
    by_typing    INTEGER NOT NULL DEFAULT 0 CHECK (by_typing >= 0),
    by_inbox     INTEGER NOT NULL DEFAULT 0 CHECK (by_inbox >= 0)
) STRICT;
INSERT INTO owed_payments_10 (session_id, last_paid_ms, last_how, last_events, by_hook, by_typing)
    SELECT session_id, last_paid_ms, last_how, last_events, by_hook, by_typing FROM owed_payments;
DROP TABLE owed_payments;
ALTER TABLE owed_payments_10 RENAME TO owed_payments;
