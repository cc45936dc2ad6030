-- Delete a bounded batch of one queue's waiting tasks (due or scheduled) in one
-- bucket: one range of the primary key, (bucket, queue, 'available'), never other
-- queues' rows nor running ones.  The ORDER BY is the key's own order: it holds the
-- planner to that range (without it, a LIMIT over a large queue looks cheaper as a
-- sequential scan that stops early, and reads ever more of the table).  Rows another
-- statement holds are skipped; the delete re-checks the status, so a task claimed
-- meanwhile is left alone.  A node of a flow purged is cancelled: an event for the
-- flows' resolver (flow_events_add).  The batch is picked once, in a WITH query (one that locks
-- rows is never folded into the statement): as a subquery of IN, a plan could run it
-- again for each row it compares, and delete more than the batch.
WITH picked AS (
    SELECT id FROM shardq.tasks
    WHERE {bucket} = %(bucket)s AND queue = %(queue)s AND status = 'available'
    ORDER BY exec_time
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM shardq.tasks
    WHERE id IN (SELECT id FROM picked)
      AND status = 'available'
    RETURNING id, flow_id, flow_next, durable
), flow_ended AS (
    SELECT g.flow_id, g.id, 'cancelled'::text AS outcome, g.flow_next AS next FROM gone AS g
), flowed AS (
    {flow_events_add}
), steps_ended AS (
    SELECT g.id FROM gone AS g WHERE g.durable
), stepped AS (
    {steps_drop}
)
SELECT gone.id FROM gone
