-- Put back a bounded batch of tasks of one bucket whose lease expired
-- (rescue_where, rescue_set).  Reads the partial index tasks_leases.  Each attempt
-- is recorded (attempts_add): its lease expired, or the task died of it.
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
              t.last_error
), ended AS (
    {rescue_ended}
), recorded AS (
    {attempts_add}
)
SELECT rescued.id, rescued.status FROM rescued
