-- Failed tasks: back in line after the backoff (or the delay the worker asked
-- for), or dead once they used up max_attempts or when the worker says so.
-- Checks each lease token.
UPDATE shardq.tasks AS t SET
    status = CASE WHEN a.dead OR t.attempts >= t.max_attempts THEN 'dead' ELSE 'available' END,
    exec_time = CASE
        WHEN a.dead OR t.attempts >= t.max_attempts THEN c.now
        WHEN a.retry_in_s IS NOT NULL THEN c.now + a.retry_in_s * interval '1 second'
        ELSE c.now + {backoff} END,
    lease_token = NULL,
    last_error = a.error,
    times_requeued = t.times_requeued + 1,
    last_requeued_at = c.now
FROM unnest(%(buckets)s::int2[], %(queues)s::text[], %(exec_times)s::timestamptz[],
            %(ids)s::uuid[], %(tokens)s::uuid[], %(errors)s::text[], %(retry_in_s)s::float8[],
            %(dead)s::bool[])
         AS a(bucket, queue, exec_time, id, lease_token, error, retry_in_s, dead),
     (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
{locate}
RETURNING t.id, t.status
