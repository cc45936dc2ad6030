-- Tasks enqueued and completed in each of the last `minutes` minutes (the current one
-- included), for one queue or (queue NULL) all of them: the minute rows the janitor
-- folded and the recent per-second rows, summed by minute; a minute with nothing
-- counted has zeros.  Reads the small table shardq.throughput (one range of its key
-- per queue), never the tasks.
WITH c AS (
    SELECT date_trunc('minute', coalesce(%(now)s::timestamptz, now())) AS minute
), counted AS (
    SELECT date_trunc('minute', tp.period) AS minute,
           sum(tp.enqueued)::int8 AS enqueued, sum(tp.completed)::int8 AS completed
    FROM shardq.throughput AS tp, c
    WHERE (%(queue)s::text IS NULL OR tp.queue = %(queue)s::text)
      AND tp.period >= c.minute - (%(minutes)s::int4 - 1) * interval '1 minute'
    GROUP BY date_trunc('minute', tp.period)
)
SELECT m.minute, coalesce(counted.enqueued, 0)::int8, coalesce(counted.completed, 0)::int8
FROM c
CROSS JOIN LATERAL generate_series(c.minute - (%(minutes)s::int4 - 1) * interval '1 minute',
                                   c.minute, interval '1 minute') AS m(minute)
LEFT JOIN counted ON counted.minute = m.minute
ORDER BY m.minute
