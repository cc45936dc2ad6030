-- Put back a bounded batch of tasks of one bucket whose lease expired: with
-- exponential backoff, or dead once they used up max_attempts (the claim that
-- leased them counted the attempt).  Reads the partial index tasks_leases.
-- Keyed tasks that will retry are left to janitor_rescue_keyed, which merges
-- them with their follow-up.
WITH c AS MATERIALIZED (
    SELECT ctid
    FROM shardq.tasks
    WHERE bucket = %(bucket)s
      AND status = 'locked'
      AND exec_time <= coalesce(%(now)s::timestamptz, now())
      AND (key IS NULL OR attempts >= max_attempts)
    ORDER BY exec_time
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
), clock AS (
    SELECT coalesce(%(now)s::timestamptz, now()) AS now
)
UPDATE shardq.tasks AS t SET
    status = CASE WHEN t.attempts >= t.max_attempts THEN 'dead' ELSE 'available' END,
    exec_time = CASE WHEN t.attempts >= t.max_attempts THEN clock.now
                     ELSE clock.now + {backoff} END,
    lease_token = NULL,
    last_error = 'lease expired: the worker stopped or overran its lease',
    times_requeued = t.times_requeued + 1,
    last_requeued_at = clock.now
FROM c, clock
WHERE t.ctid = c.ctid
RETURNING t.id, t.status
