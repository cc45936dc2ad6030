-- Pause a queue: claims of it take nothing until it is resumed.  Pausing a paused
-- queue keeps the time it was first paused.  Returns that time.
INSERT INTO shardq.queues AS q (name, paused_at)
VALUES (%(queue)s, coalesce(%(now)s::timestamptz, now()))
ON CONFLICT (name) DO UPDATE SET paused_at = coalesce(q.paused_at, EXCLUDED.paused_at)
RETURNING q.paused_at
