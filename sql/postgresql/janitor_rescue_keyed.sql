-- Put back a bounded batch of expired keyed tasks of one bucket that will retry,
-- merged with their key's follow-up if one waits (putback_keyed), with the attempt
-- given back or counted as rescue_set says.  Keyed tasks that die (rescue_dies) die
-- in janitor_rescue like any other.  The attempt is recorded (attempts_add).
WITH c AS MATERIALIZED (
    SELECT ctid
    FROM shardq.tasks
    WHERE {bucket} = %(bucket)s
      AND status = 'locked'
      AND exec_time <= coalesce(%(now)s::timestamptz, now())
      AND key IS NOT NULL
      AND NOT {rescue_dies}
    ORDER BY exec_time
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
), clock AS (
    SELECT coalesce(%(now)s::timestamptz, now()) AS now
), x AS (
    DELETE FROM shardq.tasks AS t
    USING c, clock
    WHERE t.ctid = c.ctid
    RETURNING t.*, clock.now, clock.now + {backoff} AS next_time,
        CASE WHEN {suspect} THEN t.attempts ELSE t.attempts - 1 END AS attempts_after,
        {rescue_error} AS error
), ins AS (
    {putback}
), ended AS (
    SELECT x.id, x.queue, x.times_claimed AS attempt, x.last_claimed_at AS claimed_at,
           x.worker_id, 'lease_expired'::text AS outcome, x.error
    FROM x
), recorded AS (
    {attempts_add}
)
SELECT x.id, 'available' FROM x
