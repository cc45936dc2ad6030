-- Enqueue one task.  With notify, idle workers LISTENing on channel 'shardq' hear
-- 'queue:bucket' at commit and claim from that bucket first (PostgreSQL folds
-- identical notifications of one transaction into one).  The task is counted
-- (throughput_add) in the same statement.
WITH ins AS (
    {insert_one}
), n AS (
    SELECT %(queue)s::text AS queue, count(*) AS enqueued, 0::int8 AS completed FROM ins
), counted AS (
    {throughput_add}
)
SELECT ins.id,
       (SELECT pg_notify('shardq', %(queue)s || ':' || ins.bucket) WHERE %(notify)s) AS notified
FROM ins
