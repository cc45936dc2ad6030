-- nack (retry), release and defer for keyed tasks: one statement that checks
-- each lease token, deletes the claimed rows and puts them back (putback_keyed).
-- next_time: run_at, else now + retry_in_s, else now + the backoff when
-- use_backoff; attempts_after: attempts + attempt_change.  The attempt is recorded
-- (attempts_add) with the outcome the caller names: failed, released or deferred.
WITH a AS (
    SELECT * FROM unnest(
        %(ids)s::uuid[], %(tokens)s::uuid[], %(run_ats)s::timestamptz[],
        %(delays_s)s::float8[], %(use_backoff)s::bool[], %(errors)s::text[],
        %(keep_errors)s::bool[], %(attempt_changes)s::int4[])
        AS a(id, lease_token, run_at, delay_s, use_backoff, error, keep_error, attempt_change)
), c AS (
    SELECT coalesce(%(now)s::timestamptz, now()) AS now
), x AS (
    DELETE FROM shardq.tasks AS t
    USING a, c
    {locate}
    RETURNING t.*, c.now,
        CASE WHEN a.run_at IS NOT NULL THEN a.run_at
             WHEN a.use_backoff THEN c.now + {backoff}
             ELSE c.now + coalesce(a.delay_s, 0) * interval '1 second' END AS next_time,
        t.attempts + a.attempt_change AS attempts_after,
        CASE WHEN a.keep_error THEN t.last_error ELSE a.error END AS error
), ins AS (
    {putback}
), ended AS (
    SELECT x.id, x.queue, x.times_claimed AS attempt, x.last_claimed_at AS claimed_at,
           x.worker_id, %(outcome)s::text AS outcome,
           CASE WHEN %(outcome)s::text = 'failed' THEN x.error END AS error
    FROM x
), recorded AS (
    {attempts_add}
)
SELECT x.id, x.next_time FROM x
