-- Put back a bounded batch of tasks of one bucket whose lease expired
-- (rescue_where, rescue_set).  Reads the partial index tasks_leases.
WITH c AS MATERIALIZED (
    SELECT ctid
    FROM shardq.tasks
    WHERE {rescue_where}
    ORDER BY exec_time
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
), clock AS (
    SELECT coalesce(%(now)s::timestamptz, now()) AS now
)
UPDATE shardq.tasks AS t SET
    {rescue_set}
FROM c, clock
WHERE t.ctid = c.ctid
RETURNING t.id, t.status
