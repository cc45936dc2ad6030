-- Put back a bounded batch of tasks of one bucket whose lease expired (see the
-- PostgreSQL twin); reads the partial index tasks_leases.
UPDATE shardq.tasks AS t SET
    status = CASE WHEN t.attempts >= t.max_attempts THEN 'dead' ELSE 'available' END,
    exec_time = CASE WHEN t.attempts >= t.max_attempts THEN c.now
                     ELSE c.now + {backoff} END,
    lease_token = NULL,
    last_error = 'lease expired: the worker stopped or overran its lease',
    times_requeued = t.times_requeued + 1,
    last_requeued_at = c.now
FROM (
    SELECT queue, status, exec_time, id, coalesce(%(now)s::timestamptz, now()) AS now
    FROM shardq.tasks@tasks_leases
    WHERE {bucket} = %(bucket)s
      AND status = 'locked'
      AND exec_time <= coalesce(%(now)s::timestamptz, now())
      AND (key IS NULL OR attempts >= max_attempts)
    ORDER BY exec_time
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
) AS c
WHERE t.queue = c.queue
  AND t.status = c.status
  AND t.exec_time = c.exec_time
  AND t.id = c.id
RETURNING t.id, t.status
