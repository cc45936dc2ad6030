-- A random sample of shardq.tasks' pages, for the counts the stats' caps cut short
-- (PostgreSQL, where task ids are time-ordered: the smallest ids would be the oldest
-- tasks, not a sample).  Of the table's present pages, "limit" evenly spaced ones from
-- a random start (all of them if the table has no more), each read whole by a TID range
-- scan.  Returned: the table's pages, the pages read, and per page read that holds
-- tasks its place k in the sample and its counts by queue and state (shardq.queuestats
-- scales the mean per page up to the table; the differences between neighbouring pages
-- of the sample give the error).  With %(queue)s
-- NULL, every queue; else that one.
WITH p AS (
    SELECT c.pages, least(c.pages, {limit}) AS sampled, random() AS start
    FROM (SELECT greatest(1, pg_relation_size('shardq.tasks'::regclass)
                             / current_setting('block_size')::int) AS pages) AS c
), b AS (
    SELECT k, floor((p.start + k) * p.pages / p.sampled)::int8 AS page
    FROM p, generate_series(0, p.sampled - 1) AS k
), s AS (
    SELECT b.k, t.queue, t.status, t.exec_time, t.parked
    FROM b CROSS JOIN LATERAL (
        SELECT t.queue, t.status, t.exec_time, t.parked
        FROM shardq.tasks AS t
        WHERE t.ctid >= ('(' || b.page || ',0)')::tid
          AND t.ctid < ('(' || b.page + 1 || ',0)')::tid
          AND (%(queue)s::text IS NULL OR t.queue = %(queue)s::text)
        OFFSET 0  -- planned on its own, per page: a TID range scan, never a join over the table
    ) AS t
), g AS (
    SELECT s.k, s.queue,
           {sample_states}
    FROM s, (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
    GROUP BY s.k, s.queue
)
SELECT p.pages, p.sampled, g.k, g.queue, g.available, g.scheduled, g.locked, g.dead,
       g.parked_sleep, g.parked_event, g.parked_children
FROM p LEFT JOIN g ON true
