-- Enqueue one task.  With notify, idle workers LISTENing on channel 'shardq' hear
-- the queue's name at commit (PostgreSQL folds identical notifications of one
-- transaction into one).
WITH ins AS (
    {insert_one}
)
SELECT ins.id, (SELECT pg_notify('shardq', %(queue)s) WHERE %(notify)s) AS notified
FROM ins
