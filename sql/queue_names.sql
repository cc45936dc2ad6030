-- Every queue with tasks, paused, or counted recently (queue_known asks the same of
-- one queue).  The names with tasks are found by skipping through the primary key, one
-- probe per queue and bucket (a loose index scan), never by reading the tasks
-- themselves.  A row of shardq.queues that is not paused (left by a resume of an older
-- release, or a pause whose paused_until passed) names no queue.
WITH RECURSIVE names (b, queue) AS (
    SELECT b.b, (SELECT min(t.queue) FROM shardq.tasks AS t WHERE t.{bucket} = b.b)
    FROM generate_series(0, %(bucket_count)s - 1) AS b(b)
    UNION ALL
    SELECT n.b, (SELECT min(t.queue) FROM shardq.tasks AS t
                 WHERE t.{bucket} = n.b AND t.queue > n.queue)
    FROM names AS n
    WHERE n.queue IS NOT NULL
)
SELECT queue FROM names WHERE queue IS NOT NULL
UNION
SELECT name FROM shardq.queues
WHERE paused_at IS NOT NULL
  AND (paused_until IS NULL OR paused_until > coalesce(%(now)s::timestamptz, now()))
UNION
SELECT queue FROM shardq.throughput
ORDER BY 1
