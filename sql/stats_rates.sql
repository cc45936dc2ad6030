-- Tasks enqueued and completed recently, by queue, and the seconds they were counted
-- over: from the first second with a count in the last minute to now, so that a
-- queue that just became busy shows its rate at once.  Work that began within that
-- first second began half way through it on average, hence the half second less.
-- Reads the small table shardq.throughput (one queue's rows: a range of its key).
WITH c AS (
    SELECT coalesce(%(now)s::timestamptz, now()) AS now
)
SELECT tp.queue, sum(tp.enqueued)::int8 AS enqueued, sum(tp.completed)::int8 AS completed,
       greatest(extract(epoch FROM c.now - min(tp.period))::float8 - 0.5, 1.0) AS window_s
FROM shardq.throughput AS tp, c
WHERE (%(queue)s::text IS NULL OR tp.queue = %(queue)s::text)
  AND tp.period > c.now - interval '60 seconds'
GROUP BY tp.queue, c.now
