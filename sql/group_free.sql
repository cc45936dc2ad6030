-- Free slots under max_running_per_group for the claim's group, as queue_free does
-- for the queue (tasks_group_slots holds the running ones).  With no such limit,
-- `limit` NULL slots.
WITH m AS (
    SELECT max_running_per_group AS n FROM shardq.queues WHERE name = %(queue)s
), held AS (
    SELECT held.group_slot AS s FROM shardq.tasks AS held
    WHERE held.queue = %(queue)s AND held.task_group = %(group)s AND held.status = 'locked'
      AND held.group_slot IS NOT NULL
)
SELECT free.i, free.s AS slot
FROM (
    SELECT row_number() OVER (ORDER BY candidates.s) AS i, candidates.s
    FROM (
        (SELECT s FROM m, generate_series(1, m.n) AS s WHERE m.n <= 1024
         UNION
         SELECT (1 + floor(random() * m.n))::int4 FROM m, generate_series(1, 4 * {limit})
         WHERE m.n > 1024)
        EXCEPT
        SELECT s FROM held
    ) AS candidates(s)
) AS free
WHERE free.i <= (SELECT m.n FROM m) - (SELECT count(*) FROM held)
UNION ALL
SELECT i, NULL::int4
FROM generate_series(1, {limit}) AS i
WHERE NOT EXISTS (SELECT 1 FROM m WHERE m.n IS NOT NULL)
