-- Claim a bounded batch of eligible tasks of one queue from one hash bucket.
-- The subquery's span is [/bucket/queue/'available' - .../now] of the primary
-- key, read in exec_time order; SKIP LOCKED passes over rows other claimers
-- hold.  CockroachDB's locks are best-effort under SERIALIZABLE, so the
-- guarantee is the write: the row is re-checked as 'available' by the UPDATE.
UPDATE shardq.tasks AS t SET
    status = 'locked',
    exec_time = c.now + %(lease_s)s::float8 * interval '1 second',
    attempts = t.attempts + 1,
    pending_head_start_s = 0,
    lease_token = gen_random_uuid(),
    first_claimed_at = coalesce(t.first_claimed_at, c.now),
    last_claimed_at = c.now,
    times_claimed = t.times_claimed + 1
FROM (
    SELECT queue, status, exec_time, id, coalesce(%(now)s::timestamptz, now()) AS now
    FROM shardq.tasks
    WHERE {bucket} = %(bucket)s
      AND queue = %(queue)s
      AND status = 'available'
      AND exec_time <= coalesce(%(now)s::timestamptz, now())
      AND (key IS NULL OR NOT EXISTS (
          SELECT 1 FROM shardq.tasks AS r
          WHERE r.queue = %(queue)s AND r.key = tasks.key AND r.status = 'locked'
          OFFSET 0))
    ORDER BY exec_time
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
) AS c
WHERE t.queue = c.queue
  AND t.status = c.status
  AND t.exec_time = c.exec_time
  AND t.id = c.id
RETURNING t.id, t.queue, t.{bucket} AS bucket, t.exec_time, t.lease_token, t.payload,
          t.attempts, t.max_attempts, t.priority, t.enqueued_at, t.key
