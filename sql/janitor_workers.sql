-- Forget workers not seen for worker_stale_s (they died, or were cut off): the table
-- holds one row per worker process, so one statement takes them all.
DELETE FROM shardq.workers
WHERE last_seen_at <= coalesce(%(now)s::timestamptz, now())
                      - %(worker_stale_s)s::float8 * interval '1 second'
RETURNING id
