-- Cancel nodes that wait for a node that will never succeed (it was cancelled, or
-- dropped from the dead letters): their rows are deleted, and each cancellation is
-- an event of its own (flow_events_add), so that the nodes waiting for them are
-- cancelled in turn by the next fold.
WITH gone AS (
    DELETE FROM shardq.tasks AS t
    WHERE t.id = ANY(%(ids)s::uuid[])
      AND t.status = 'waiting'
    RETURNING t.id, t.flow_id, t.flow_next
), flow_ended AS (
    SELECT g.flow_id, g.id, 'cancelled'::text AS outcome, g.flow_next AS next FROM gone AS g
), flowed AS (
    {flow_events_add}
)
SELECT count(*) FROM gone
