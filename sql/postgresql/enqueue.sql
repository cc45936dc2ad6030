-- Enqueue one task.  With notify, idle workers LISTENing on channel 'shardq' hear
-- 'queue:bucket' at commit and claim from that bucket first (PostgreSQL folds
-- identical notifications of one transaction into one).
WITH ins AS (
    {insert_one}
)
SELECT ins.id,
       (SELECT pg_notify('shardq', %(queue)s || ':' || ins.bucket) WHERE %(notify)s) AS notified
FROM ins
