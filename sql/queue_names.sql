-- Every queue with tasks, paused, or counted recently.  The names with tasks are
-- found by skipping through the primary key, one probe per queue and bucket (a
-- loose index scan), never by reading the tasks themselves.
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
UNION
SELECT queue FROM shardq.throughput
ORDER BY 1
