-- A claimed task's columns, in the order of shardq.Task's fields less the queue and
-- the lease token, which are the claim's own parameters (shardq.claims.RETURNED).
-- A task whose last lease expired without a result (the janitor's mark, rescue_set)
-- is suspect: it may be what killed its worker, and runs alone.
-- The payload comes as its JSON text, which the client decodes (shardq.claims): the
-- driver's jsonb loader took about three times as long per row.
-- trace_context is NULL unless the task was enqueued under a tracer.
t.id, t.{bucket} AS bucket, t.exec_time, t.payload::text AS payload,
    t.attempts, t.max_attempts, t.priority, t.enqueued_at, t.key,
    {suspect} AS suspect, t.trace_context
