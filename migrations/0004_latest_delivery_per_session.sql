-- wakebridge ledger, schema 4: the latest delivery of each session in a table of its own,
-- instead of an index over every delivery by session.
-- With many busy sessions, `deliveries_by_target` had a hot leaf page per session, and every
-- commit wrote each of them to the WAL. This table holds one small row per session, so a commit
-- touches a few pages whatever the number of sessions; a trigger keeps it current.
CREATE TABLE latest_deliveries (
    session_id  TEXT    PRIMARY KEY NOT NULL,
    delivery_id INTEGER NOT NULL,
    at_ms       INTEGER NOT NULL
) STRICT;

-- Latest by time, the newest insert among equal times (what the index used to answer).
INSERT INTO latest_deliveries (session_id, delivery_id, at_ms)
    SELECT d.target_session, d.id, d.at_ms FROM deliveries d
    WHERE d.id = (SELECT id FROM deliveries WHERE target_session = d.target_session
                  ORDER BY at_ms DESC, id DESC LIMIT 1);

CREATE TRIGGER deliveries_keep_latest AFTER INSERT ON deliveries
BEGIN
    INSERT INTO latest_deliveries (session_id, delivery_id, at_ms)
        VALUES (NEW.target_session, NEW.id, NEW.at_ms)
        ON CONFLICT (session_id) DO UPDATE
            SET delivery_id = excluded.delivery_id, at_ms = excluded.at_ms
            WHERE excluded.at_ms >= latest_deliveries.at_ms;
END;

DROP INDEX IF EXISTS deliveries_by_target;
