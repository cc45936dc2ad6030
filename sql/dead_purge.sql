-- Delete the dead tasks of one queue that died more than older_than_s ago.  A node of
-- a flow dropped is an event for the flows' resolver (flow_events_add): the nodes that
-- wait for it are cancelled.
WITH gone AS (
    DELETE FROM shardq.tasks AS t
    USING (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
    WHERE t.{bucket} = ANY(%(buckets)s::int2[])
      AND t.queue = %(queue)s
      AND t.status = 'dead'
      AND t.exec_time <= c.now - %(older_than_s)s::float8 * interval '1 second'
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
