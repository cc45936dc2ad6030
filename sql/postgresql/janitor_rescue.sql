-- Put back a bounded batch of tasks of one bucket whose lease expired
-- (rescue_where, rescue_set).  Reads the partial index tasks_leases.  Each attempt
-- is recorded (attempts_add): its lease expired, or the task died of it (a node of a flow
-- that dies leaves an event for the flows' resolver, flow_events_add).
WITH c AS MATERIALIZED (
    SELECT ctid
    FROM shardq.tasks
    WHERE {rescue_where}
    ORDER BY exec_time
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
), clock AS (
    SELECT coalesce(%(now)s::timestamptz, now()) AS now
), rescued AS (
    UPDATE shardq.tasks AS t SET
        {rescue_set}
    FROM c, clock
    WHERE t.ctid = c.ctid
    RETURNING t.id, t.status, t.queue, t.times_claimed, t.last_claimed_at, t.worker_id,
              t.last_error, t.flow_id, t.flow_next
), ended AS (
    {rescue_ended}
), recorded AS (
    {attempts_add}
), flow_ended AS (
    SELECT r.flow_id, r.id, 'dead'::text AS outcome, r.flow_next AS next
    FROM rescued AS r WHERE r.status = 'dead'
), flowed AS (
    {flow_events_add}
)
SELECT rescued.id, rescued.status FROM rescued
