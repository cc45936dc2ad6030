-- Free slots under the queue's max_running, read from shardq.queues by this very
-- statement (a worker's cached limits only choose the statement): numbers from 1 to
-- the limit that no running task of the queue holds, in random order so that
-- concurrent claims seldom pick the same one, and no more of them than the limit
-- less the running tasks holding a slot (a lowered limit may leave tasks running on
-- slots above it).  Above 1024 the candidates are random numbers instead of all of
-- them (a limit that high seldom binds).  With no limit, `limit` NULL slots.
SELECT free.i, free.s AS slot
FROM (
    SELECT row_number() OVER (ORDER BY random()) AS i, candidates.s
    FROM (
        (SELECT s FROM (SELECT max_running AS n FROM shardq.queues WHERE name = %(queue)s) AS m,
                       generate_series(1, m.n) AS s
         WHERE m.n <= 1024
         UNION
         SELECT (1 + floor(random() * m.n))::int4
         FROM (SELECT max_running AS n FROM shardq.queues WHERE name = %(queue)s) AS m,
              generate_series(1, 4 * {limit})
         WHERE m.n > 1024)
        EXCEPT
        SELECT held.slot FROM shardq.tasks AS held
        WHERE held.queue = %(queue)s AND held.status = 'locked' AND held.slot IS NOT NULL
    ) AS candidates(s)
) AS free
WHERE free.i <= (SELECT max_running FROM shardq.queues WHERE name = %(queue)s)
                - (SELECT count(*) FROM shardq.tasks AS held
                   WHERE held.queue = %(queue)s AND held.status = 'locked' AND held.slot IS NOT NULL)
UNION ALL
SELECT i, NULL::int4
FROM generate_series(1, {limit}) AS i
WHERE NOT EXISTS (
    SELECT 1 FROM shardq.queues AS m WHERE m.name = %(queue)s AND m.max_running IS NOT NULL)
