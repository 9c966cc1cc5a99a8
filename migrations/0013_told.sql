-- wakebridge ledger, schema 13: whether the bus or a person (`wakebridge wake`) ever told a
-- session something, kept beside its latest delivery. The session loop keeps a session with no
-- pane only then: one told nothing but a context warning is a person's own, not an agent's.
-- Deliveries are pruned after a day and have no index by session (schema 4), so this column
-- answers it with one key lookup, written by the upsert each commit already makes.
ALTER TABLE latest_deliveries ADD COLUMN told_ms INTEGER;

UPDATE latest_deliveries SET told_ms = (
    SELECT max(at_ms) FROM deliveries d
    WHERE d.target_session = latest_deliveries.session_id AND d.source IN ('hook', 'wake'));
