-- Delete dead tasks by id (a dead letter someone chose to drop): each id is looked
-- up within its bucket; tasks that are not dead are left alone.  A node of a flow
-- dropped is an event for the flows' resolver (flow_events_add): the nodes that wait
-- for it are cancelled.
WITH gone AS (
    DELETE FROM shardq.tasks AS t
    WHERE t.{bucket} = ANY(%(buckets)s::int2[])
      AND t.id = ANY(%(ids)s::uuid[])
      AND t.status = 'dead'
    RETURNING t.id, t.flow_id, t.flow_next, t.durable
), flow_ended AS (
    SELECT g.flow_id, g.id, 'dropped'::text AS outcome, g.flow_next AS next FROM gone AS g
), flowed AS (
    {flow_events_add}
), steps_ended AS (
    SELECT g.id FROM gone AS g WHERE g.durable
), stepped AS (
    {steps_drop}
)
SELECT gone.id FROM gone
