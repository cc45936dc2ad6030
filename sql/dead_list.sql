-- The newest dead tasks of one queue: one backward range scan per bucket of
-- (bucket, queue, 'dead'), merged.  exec_time of a dead task is when it died.
SELECT d.*
FROM generate_series(0, %(bucket_count)s::int4 - 1) AS b(n)
CROSS JOIN LATERAL (
    SELECT t.id, t.queue, t.{bucket} AS bucket, t.status, t.exec_time, t.payload, t.key,
           t.priority, t.pending_head_start_s, t.attempts, t.max_attempts, t.lease_token,
           t.last_error, t.enqueued_at, t.first_claimed_at, t.last_claimed_at, t.times_claimed,
           t.times_requeued, t.last_requeued_at, 'dead' AS state
    FROM shardq.tasks AS t
    WHERE t.{bucket} = b.n AND t.queue = %(queue)s AND t.status = 'dead'
    ORDER BY t.exec_time DESC
    LIMIT %(limit)s
) AS d
ORDER BY d.exec_time DESC
LIMIT %(limit)s
