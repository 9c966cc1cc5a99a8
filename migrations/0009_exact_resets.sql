-- wakebridge ledger, schema 9: how exact a limit's reset is.
-- A notice shows its reset to the minute ('resets 9:16am'), up to 59 s before the server lifts
-- the limit; a transcript record (`quotaLimits.resetsAt`) and the status line's `rate_limits`
-- give it to the second. The most exact reset seen wins, whatever arrived first: a resume typed
-- at the minute would meet a 429.
ALTER TABLE limits ADD COLUMN resets_exact INTEGER NOT NULL DEFAULT 0 CHECK (resets_exact IN (0, 1));
