-- Claim a bounded batch of eligible tasks of one queue from one bucket.
-- The CTE reads one index range of tasks_pkey, (bucket, queue, 'available',
-- exec_time <= now), in exec_time order, and stops at the limit: locked,
-- dead and future rows lie outside that range and are never read.  The limit is
-- a literal so that a prepared (generic) plan knows the scan is small.
-- MATERIALIZED keeps the planner from merging the CTE into the UPDATE, and the
-- locked rows are updated through their ctid, with no second index descent.
-- A keyed task waits while a task of its key runs (its follow-up): the check
-- probes the small index tasks_running_keys and unkeyed tasks skip it.  OFFSET 0
-- keeps the planner from turning the probe into a hash of every running key.
WITH c AS MATERIALIZED (
    SELECT ctid
    FROM shardq.tasks
    WHERE bucket = %(bucket)s
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
), clock AS (
    SELECT coalesce(%(now)s::timestamptz, now()) AS now
)
UPDATE shardq.tasks AS t SET
    status = 'locked',
    exec_time = clock.now + %(lease_s)s::float8 * interval '1 second',
    attempts = t.attempts + 1,
    pending_head_start_s = 0,
    lease_token = gen_random_uuid(),
    first_claimed_at = coalesce(t.first_claimed_at, clock.now),
    last_claimed_at = clock.now,
    times_claimed = t.times_claimed + 1
FROM c, clock
WHERE t.ctid = c.ctid
RETURNING t.id, t.queue, t.bucket, t.exec_time, t.lease_token, t.payload,
          t.attempts, t.max_attempts, t.priority, t.enqueued_at, t.key
