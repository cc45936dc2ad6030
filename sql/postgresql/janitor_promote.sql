-- Give due scheduled tasks of one bucket their pending priority head start
-- (promote_where, promote_set).  Reads the partial index tasks_head_starts.
WITH c AS MATERIALIZED (
    SELECT ctid
    FROM shardq.tasks
    WHERE {promote_where}
    ORDER BY exec_time
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
)
UPDATE shardq.tasks AS t SET
    {promote_set}
FROM c
WHERE t.ctid = c.ctid
RETURNING t.id
