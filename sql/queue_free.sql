-- Free slots under the queue's max_running, read from shardq.queues by this very
-- statement (a worker's cached limits only choose the statement): the numbers from 1
-- to the limit that no running task of the queue holds (tasks_slots, read once), and
-- no more of them than the limit less the running tasks holding a slot (a lowered
-- limit may leave tasks running on slots above it).  Lowest first: every claim takes
-- its slots in one order, so two claims that want the same slot never wait for each
-- other in a cycle; the one that comes second fails at once on the unique index and
-- is retried.  Above 1024 the candidates are random numbers instead of all of them (a
-- limit that high seldom binds).  With no limit, `limit` NULL slots.
WITH m AS (
    SELECT max_running AS n FROM shardq.queues WHERE name = %(queue)s
), held AS (
    SELECT held.slot AS s FROM shardq.tasks AS held
    WHERE held.queue = %(queue)s AND held.status = 'locked' AND held.slot IS NOT NULL
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
