-- wakebridge ledger, schema 14: the daemon's claim on what a session is owed while it sends the
-- wake that pays it. The session's Stop hook pays the same debt by itself; while a claim stands
-- it leaves the debt to the wake in flight, so one debt is told once. A claim lapses at
-- `until_ms` (the wake's budget), so one a crash left behind holds nothing up for long.
CREATE TABLE claims (
    session_id TEXT    PRIMARY KEY NOT NULL,
    until_ms   INTEGER NOT NULL
) STRICT;
