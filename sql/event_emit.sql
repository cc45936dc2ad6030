-- Emit events (Client.emit_event): the first emit of a name writes its payload; a
-- later one changes nothing (an emit is idempotent).  The row of an event that tasks
-- park on already exists without a payload (park_many): the payload is written into
-- it, under the row's lock, which orders this with a park on the same event.  Rows
-- are written in name order, as park_many writes them, so two calls never wait for
-- each other's rows in a cycle.  An emitted event is kept keep_s (event_keep_s), for
-- the waits that begin later: the tasks parked on it are woken now (event_wake).
-- Returns the names this call emitted first.
INSERT INTO shardq.events AS e (name, payload, emitted_at, expires_at)
SELECT u.name, u.payload, c.now, c.now + %(keep_s)s::float8 * interval '1 second'
FROM unnest(%(names)s::text[], %(payloads)s::jsonb[]) AS u(name, payload),
     (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
ORDER BY u.name
ON CONFLICT (name) DO UPDATE SET
    payload = EXCLUDED.payload, emitted_at = EXCLUDED.emitted_at,
    expires_at = EXCLUDED.expires_at
WHERE e.emitted_at IS NULL
RETURNING e.name
