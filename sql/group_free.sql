-- Free slots under max_running_per_group for the claim's group, as queue_free does
-- for the queue (tasks_group_slots holds the running ones).  With no such limit,
-- `limit` NULL slots.
SELECT free.i, free.s AS slot
FROM (
    SELECT row_number() OVER (ORDER BY random()) AS i, candidates.s
    FROM (
        (SELECT s FROM (SELECT max_running_per_group AS n FROM shardq.queues WHERE name = %(queue)s) AS m,
                       generate_series(1, m.n) AS s
         WHERE m.n <= 1024
         UNION
         SELECT (1 + floor(random() * m.n))::int4
         FROM (SELECT max_running_per_group AS n FROM shardq.queues WHERE name = %(queue)s) AS m,
              generate_series(1, 4 * {limit})
         WHERE m.n > 1024)
        EXCEPT
        SELECT held.group_slot FROM shardq.tasks AS held
        WHERE held.queue = %(queue)s AND held.task_group = %(group)s AND held.status = 'locked'
      AND held.group_slot IS NOT NULL
    ) AS candidates(s)
) AS free
WHERE free.i <= (SELECT max_running_per_group FROM shardq.queues WHERE name = %(queue)s)
                - (SELECT count(*) FROM shardq.tasks AS held
                   WHERE held.queue = %(queue)s AND held.task_group = %(group)s AND held.status = 'locked'
      AND held.group_slot IS NOT NULL)
UNION ALL
SELECT i, NULL::int4
FROM generate_series(1, {limit}) AS i
WHERE NOT EXISTS (
    SELECT 1 FROM shardq.queues AS m WHERE m.name = %(queue)s AND m.max_running_per_group IS NOT NULL)
