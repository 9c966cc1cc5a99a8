-- wakebridge ledger, schema 16: the ids of the commands other machines of the fleet sent this
-- one, so a command replayed on the bus (or read again by the catch-up after its webhook) runs
-- once. A command is good for minutes; its id is kept a day (`seen_ms`), then pruned.
CREATE TABLE fleet_commands (
    id TEXT PRIMARY KEY,
    seen_ms INTEGER NOT NULL
) WITHOUT ROWID;
