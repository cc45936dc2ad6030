-- Insert keyed tasks (or any batch given as rows) with coalescing; see insert_rows.
-- With notify, LISTENing workers hear the queue's name at commit.
WITH ins AS (
    {insert}
)
SELECT ins.id, ins.key, (SELECT pg_notify('shardq', %(queue)s) WHERE %(notify)s) AS notified
FROM ins
