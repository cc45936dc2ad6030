-- Give claimed tasks back without penalty (release, defer): the attempt the
-- claim counted is taken back and each task stands in line at its own time.  The
-- lease token stays on the row (see nack_many).  The attempt is recorded
-- (attempts_add) with the outcome the caller names, released or deferred.
WITH back AS (
    UPDATE shardq.tasks AS t SET
        status = 'available',
        exec_time = coalesce(a.run_at, c.now + a.delay_s * interval '1 second'),
        attempts = t.attempts - 1,
        times_requeued = t.times_requeued + 1,
        last_requeued_at = c.now
    FROM unnest(%(ids)s::uuid[], %(tokens)s::uuid[], %(run_ats)s::timestamptz[],
                %(delays_s)s::float8[])
             AS a(id, lease_token, run_at, delay_s),
         (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
    {locate}
    RETURNING t.id, t.exec_time, t.queue, t.times_claimed, t.last_claimed_at, t.worker_id
), ended AS (
    SELECT b.id, b.queue, b.times_claimed AS attempt, b.last_claimed_at AS claimed_at,
           b.worker_id, %(outcome)s::text AS outcome, NULL::text AS error
    FROM back AS b
), recorded AS (
    {attempts_add}
)
SELECT back.id, back.exec_time FROM back
