-- wakebridge ledger, schema 17: the agent a session runs (`claude`, `codex`), from its hooks
-- (`wakebridge hook --agent codex`). Rows from before are Claude Code's, the only agent then.
ALTER TABLE sessions ADD COLUMN agent TEXT NOT NULL DEFAULT 'claude';
