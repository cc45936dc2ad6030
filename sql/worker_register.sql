-- A worker says it is alive: its row is written when it starts and its last_seen_at
-- moved by its heartbeat.  An upsert, so that a worker whose row the janitor deleted
-- (it was not seen for worker_stale_s: a long pause, a partition) comes back.  It
-- carries the layout generation the worker claims with, which a reshard waits for.
INSERT INTO shardq.workers AS w
    (id, name, host, pid, queues, started_at, last_seen_at, generation)
SELECT %(id)s::uuid, %(name)s, %(host)s, %(pid)s, %(queues)s::text[], c.now, c.now,
       %(generation)s::int8
FROM (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
ON CONFLICT (id) DO UPDATE SET last_seen_at = EXCLUDED.last_seen_at,
                               generation = EXCLUDED.generation
