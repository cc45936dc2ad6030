-- Retention: delete a bounded batch of one bucket's tasks that have been dead
-- longer than dead_retention_s (CockroachDB deletes with a LIMIT directly).  A node of
-- a flow dropped is an event for the flows' resolver (flow_events_add).
WITH gone AS (
    DELETE FROM shardq.tasks
    WHERE {bucket} = %(bucket)s
      AND status = 'dead'
      AND exec_time <= coalesce(%(now)s::timestamptz, now())
                       - %(dead_retention_s)s::float8 * interval '1 second'
    LIMIT {limit}
    RETURNING id, flow_id, flow_next, durable
), flow_ended AS (
    SELECT g.flow_id, g.id, 'dropped'::text AS outcome, g.flow_next AS next FROM gone AS g
), flowed AS (
    {flow_events_add}
), steps_ended AS (
    SELECT g.id FROM gone AS g WHERE g.durable
), stepped AS (
    {steps_drop}
)
SELECT gone.id, 'purged' FROM gone
