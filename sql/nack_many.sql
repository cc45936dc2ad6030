-- Failed tasks: back in line after the backoff (or the delay the worker asked
-- for), or dead once they used up max_attempts or when the worker says so.
-- Checks each lease token, and keeps it on the row: a retry of this statement after
-- its reply was lost finds the task no longer locked but still bearing the token,
-- which tells it the failure was recorded (shardq.settle, settled_check).
UPDATE shardq.tasks AS t SET
    status = CASE WHEN a.dead OR t.attempts >= t.max_attempts THEN 'dead' ELSE 'available' END,
    exec_time = CASE
        WHEN a.dead OR t.attempts >= t.max_attempts THEN c.now
        WHEN a.retry_in_s IS NOT NULL THEN c.now + a.retry_in_s * interval '1 second'
        ELSE c.now + {backoff} END,
    last_error = a.error,
    -- A task that dies is not put back in line: only a retry counts as a requeue.
    times_requeued = t.times_requeued
        + CASE WHEN a.dead OR t.attempts >= t.max_attempts THEN 0 ELSE 1 END,
    last_requeued_at = CASE WHEN a.dead OR t.attempts >= t.max_attempts
                            THEN t.last_requeued_at ELSE c.now END
FROM unnest(%(ids)s::uuid[], %(tokens)s::uuid[], %(errors)s::text[], %(retry_in_s)s::float8[],
            %(dead)s::bool[])
         AS a(id, lease_token, error, retry_in_s, dead),
     (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
{locate}
RETURNING t.id, t.status
