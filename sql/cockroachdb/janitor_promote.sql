-- Give due scheduled tasks of one bucket their pending priority head start
-- (promote_where, promote_set); reads the partial index tasks_head_starts.
UPDATE shardq.tasks AS t SET
    {promote_set}
FROM (
    SELECT queue, status, exec_time, id
    FROM shardq.tasks@tasks_head_starts
    WHERE {promote_where}
    ORDER BY exec_time
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
) AS c
WHERE t.queue = c.queue
  AND t.status = c.status
  AND t.exec_time = c.exec_time
  AND t.id = c.id
RETURNING t.id
