-- A uniform sample of the whole table (CockroachDB, where task ids are random uuids;
-- PostgreSQL samples pages, stats_pages): the "limit" tasks with the smallest ids (a
-- random sample, ids being random), read through tasks_ids, and how
-- far into the id space they reach; counted by queue and state.  shardq.stats
-- scales the counts up by the share of the id space read.  With %(queue)s NULL,
-- every queue of the sample; else that one.
WITH s AS (
    SELECT t.id, t.queue, t.status, t.exec_time, t.parked
    FROM shardq.tasks AS t
    ORDER BY t.id
    LIMIT {limit}
), span AS (
    SELECT count(*) AS sampled, (SELECT s.id FROM s ORDER BY s.id DESC LIMIT 1) AS last_id
    FROM s
), g AS (
    SELECT s.queue,
           {sample_states}
    FROM s, (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
    WHERE %(queue)s::text IS NULL OR s.queue = %(queue)s::text
    GROUP BY s.queue
)
SELECT span.sampled, span.last_id, g.queue, g.available, g.scheduled, g.locked, g.dead,
       g.parked_sleep, g.parked_event, g.parked_children
FROM span LEFT JOIN g ON true
