-- Give due scheduled tasks of one bucket their pending priority head start
-- (see the PostgreSQL twin); reads the partial index tasks_head_starts.
UPDATE shardq.tasks AS t SET
    exec_time = t.exec_time - t.pending_head_start_s * interval '1 second',
    pending_head_start_s = 0
FROM (
    SELECT queue, status, exec_time, id
    FROM shardq.tasks@tasks_head_starts
    WHERE {bucket} = %(bucket)s
      AND pending_head_start_s > 0
      AND status = 'available'
      AND exec_time <= coalesce(%(now)s::timestamptz, now())
    ORDER BY exec_time
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
) AS c
WHERE t.queue = c.queue
  AND t.status = c.status
  AND t.exec_time = c.exec_time
  AND t.id = c.id
RETURNING t.id
