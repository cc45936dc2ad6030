-- Give claimed tasks back without penalty (release, defer): the attempt the
-- claim counted is taken back and each task stands in line at its own time.  The
-- lease token stays on the row (see nack_many).
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
RETURNING t.id, t.exec_time
