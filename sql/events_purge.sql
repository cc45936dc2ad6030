-- Retention: delete a bounded batch of events that expired (events_expiry): an
-- emitted event keeps the time it was given, a row written by a park lasts until
-- the park's deadline, and one emitted after that lasts as long as any.
DELETE FROM shardq.events
WHERE name = ANY(ARRAY(
    SELECT e.name FROM shardq.events AS e
    WHERE e.expires_at <= coalesce(%(now)s::timestamptz, now())
    ORDER BY e.expires_at
    LIMIT {limit}))
RETURNING name
