-- Give due scheduled tasks of one bucket their pending priority head start:
-- they move from run_at to run_at - priority seconds.  Reads the partial index
-- tasks_head_starts, which holds only such tasks.
WITH c AS MATERIALIZED (
    SELECT ctid
    FROM shardq.tasks
    WHERE bucket = %(bucket)s
      AND pending_head_start_s > 0
      AND status = 'available'
      AND exec_time <= coalesce(%(now)s::timestamptz, now())
    ORDER BY exec_time
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
)
UPDATE shardq.tasks AS t SET
    exec_time = t.exec_time - t.pending_head_start_s * interval '1 second',
    pending_head_start_s = 0
FROM c
WHERE t.ctid = c.ctid
RETURNING t.id
