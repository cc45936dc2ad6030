-- Put back a bounded batch of tasks of one bucket whose lease expired
-- (rescue_where, rescue_set); reads the partial index tasks_leases.  Each attempt is
-- recorded (attempts_add): its lease expired, or the task died of it (a node of a flow
-- that dies leaves an event for the flows' resolver, flow_events_add).
WITH rescued AS (
UPDATE shardq.tasks AS t SET
    {rescue_set}
FROM (
    SELECT queue, status, exec_time, id
    FROM shardq.tasks@tasks_leases
    WHERE {rescue_where}
    ORDER BY exec_time
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
) AS c, (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS clock
WHERE t.queue = c.queue
  AND t.status = c.status
  AND t.exec_time = c.exec_time
  AND t.id = c.id
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
