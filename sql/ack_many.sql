-- Delete finished tasks, each only if its lease token still matches, and count them
-- as completed (throughput_add) in the same statement.  It returns how many it deleted:
-- the caller looks for the others only when that falls short (shardq.settle.ack).
WITH done AS (
    DELETE FROM shardq.tasks AS t
    USING unnest(%(ids)s::uuid[], %(tokens)s::uuid[]) AS a(id, lease_token)
    {locate}
    RETURNING t.id, t.queue
), n AS (
    SELECT done.queue, 0::int8 AS enqueued, count(*) AS completed FROM done GROUP BY done.queue
), counted AS (
    {throughput_add}
)
SELECT count(*) FROM done
