-- Delete finished tasks, each only if its lease token still matches, and count them
-- as completed and record their attempts (acked) in the same statement.  It returns
-- how many it deleted: the caller looks for the others only when that falls short
-- (shardq.settle.ack).
WITH done AS (
    DELETE FROM shardq.tasks AS t
    USING unnest(%(ids)s::uuid[], %(tokens)s::uuid[]) AS a(id, lease_token)
    {locate}
    RETURNING t.id, t.queue, t.times_claimed, t.last_claimed_at, t.worker_id, t.flow_id,
              t.flow_next, t.durable
), {acked}
SELECT count(*) FROM done
