-- Fold per-second throughput counts older than keep_s into one row per queue and
-- minute (slot -1, the rows the hour's chart reads), and forget minute rows older
-- than history_s.  This statement deletes and returns the per-second rows' sums by
-- minute; throughput_fold_add adds them in the same transaction.  Each row is
-- deleted by one statement only, so janitors folding at once never count it twice,
-- and a retry after a lost commit finds nothing left to fold.
WITH c AS (
    SELECT coalesce(%(now)s::timestamptz, now()) AS now
), gone AS (
    DELETE FROM shardq.throughput AS tp
    WHERE (tp.slot >= 0
           AND tp.period < (SELECT now FROM c) - %(keep_s)s::float8 * interval '1 second')
       OR (tp.slot < 0
           AND tp.period < (SELECT now FROM c) - %(history_s)s::float8 * interval '1 second')
    RETURNING tp.queue, tp.period, tp.slot, tp.enqueued, tp.completed
)
SELECT queue, date_trunc('minute', period) AS minute,
       sum(enqueued)::int8 AS enqueued, sum(completed)::int8 AS completed
FROM gone
WHERE slot >= 0
GROUP BY queue, date_trunc('minute', period)
