-- Whether a queue is one that queue_names lists: it has tasks (one probe of the primary
-- key per bucket, never a read of the tasks themselves), it is paused (a pause whose
-- paused_until passed has ended), or it counted tasks within the throughput history
-- (the last hour).  Pause and resume refuse other names, which are typos far more
-- often than queues yet to come.
SELECT EXISTS (
           SELECT 1 FROM generate_series(0, %(bucket_count)s - 1) AS b(b)
           WHERE EXISTS (SELECT 1 FROM shardq.tasks AS t
                         WHERE t.{bucket} = b.b AND t.queue = %(queue)s))
    OR EXISTS (SELECT 1 FROM shardq.queues AS q
               WHERE q.name = %(queue)s AND q.paused_at IS NOT NULL
                 AND (q.paused_until IS NULL
                      OR q.paused_until > coalesce(%(now)s::timestamptz, now())))
    OR EXISTS (SELECT 1 FROM shardq.throughput AS tp WHERE tp.queue = %(queue)s)
