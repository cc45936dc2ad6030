-- Free slots under max_running_per_group for the claim's group, as queue_free does
-- for the queue (tasks_group_slots holds the running ones; above 1024, random numbers
-- probed there).  With no such limit, `limit` NULL slots.
WITH m AS (
    SELECT max_running_per_group AS n FROM shardq.queues WHERE name = %(queue)s
), held AS (
    SELECT held.group_slot AS s FROM shardq.tasks AS held
    WHERE held.queue = %(queue)s AND held.task_group = %(group)s AND held.status = 'locked'
      AND held.group_slot IS NOT NULL AND (SELECT m.n FROM m) <= 1024
), drawn AS (
    SELECT DISTINCT (1 + floor(random() * m.n))::int4 AS s
    FROM m, generate_series(1, 2 * {limit})
    WHERE m.n > 1024
), room AS (
    SELECT CASE
        WHEN m.n <= 1024 THEN m.n - (SELECT count(*) FROM held)
        WHEN NOT EXISTS (
            SELECT 1 FROM shardq.tasks AS above
            WHERE above.queue = %(queue)s AND above.task_group = %(group)s
              AND above.status = 'locked' AND above.group_slot > m.n)
        THEN m.n
        ELSE m.n - (SELECT count(*) FROM shardq.tasks AS running
                    WHERE running.queue = %(queue)s AND running.task_group = %(group)s
                      AND running.status = 'locked' AND running.group_slot IS NOT NULL)
    END AS n
    FROM m
)
SELECT free.i, free.s AS slot
FROM (
    SELECT row_number() OVER (ORDER BY candidates.s) AS i, candidates.s
    FROM (
        (SELECT s FROM m, generate_series(1, m.n) AS s WHERE m.n <= 1024
         EXCEPT
         SELECT s FROM held)
        UNION ALL
        SELECT drawn.s FROM drawn
        WHERE NOT EXISTS (
            SELECT 1 FROM shardq.tasks AS taken
            WHERE taken.queue = %(queue)s AND taken.task_group = %(group)s
              AND taken.status = 'locked' AND taken.group_slot = drawn.s
            OFFSET 0)
    ) AS candidates(s)
) AS free
WHERE free.i <= (SELECT room.n FROM room)
UNION ALL
SELECT i, NULL::int4
FROM generate_series(1, {limit}) AS i
WHERE NOT EXISTS (SELECT 1 FROM m WHERE m.n IS NOT NULL)
