-- An event's payload, if it was emitted (a row written by a park alone has none).
SELECT e.payload::text FROM shardq.events AS e
WHERE e.name = %(name)s AND e.emitted_at IS NOT NULL
