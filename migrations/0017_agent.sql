-- wakebridge ledger, schema 17: the agent a session runs (`claude`, `codex`), from its hooks
-- (`wakebridge hook --agent codex`). Rows from before are Claude Code's, the only agent then.
ALTER TABLE sessions ADD COLUMN agent TEXT NOT NULL DEFAULT 'claude';
-- A Codex session's inbox is its Codex home's control socket and the thread it serves there
-- (the session id); `thread` is NULL for Claude Code's own inbox socket.
ALTER TABLE inboxes ADD COLUMN thread TEXT;
