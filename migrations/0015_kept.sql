-- wakebridge ledger, schema 15: a session opted in to be kept working, from its SessionStart
-- hook's environment (WAKEBRIDGE=keep; `wakebridge launch` sets it). With `[nudger] keep =
-- "agents"` only such sessions, and those the bus or a person told something (told_ms, schema
-- 13), are nudged and resumed; the rule is the same for a pane and an inbox.
ALTER TABLE sessions ADD COLUMN kept INTEGER NOT NULL DEFAULT 0;
