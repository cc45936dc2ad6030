-- Add counts to the throughput row of one queue, period and slot.  The counts are the
-- rows (queue, enqueued, completed) of the CTE `n` the statement defines; the period is the
-- second "now" falls in, and the slot one of 16 picked at random, so that
-- concurrent statements rarely wait for the same row's lock.  A statement that
-- counted nothing (a retry that found its work done) adds no row.
INSERT INTO shardq.throughput AS tp (queue, period, slot, enqueued, completed)
SELECT n.queue,
       date_trunc('second', c.now),
       floor(random() * 16)::int2, n.enqueued, n.completed
FROM n, (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
WHERE n.enqueued + n.completed > 0
ON CONFLICT (queue, period, slot) DO UPDATE SET
    enqueued = tp.enqueued + EXCLUDED.enqueued,
    completed = tp.completed + EXCLUDED.completed
