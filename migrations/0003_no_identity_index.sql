-- wakebridge ledger, schema 3: no index on `identity`.
-- Identities are SHA-256 digests, so every insert landed on a random leaf of that index: under
-- load each delivery dirtied (and wrote to the WAL) a page of its own. The start-up warm-up, its
-- only reader, now walks `deliveries_by_time` from the newest row instead.
DROP INDEX IF EXISTS deliveries_by_identity;
