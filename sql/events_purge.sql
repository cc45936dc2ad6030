-- Retention: delete a bounded batch of events that expired (events_expiry): an
-- emitted event event_keep_s after its emit, a row written by a park (no payload)
-- event_keep_s after the latest deadline of the parks on it.
DELETE FROM shardq.events
WHERE name = ANY(ARRAY(
    SELECT e.name FROM shardq.events AS e
    WHERE e.expires_at <= coalesce(%(now)s::timestamptz, now())
    ORDER BY e.expires_at
    LIMIT {limit}))
RETURNING name
