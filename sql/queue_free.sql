-- Free slots under the queue's max_running, read from shardq.queues by this very
-- statement (a worker's cached limits only choose the statement).  The unique partial
-- index tasks_slots keeps the limit: two running tasks never hold one slot.
--
-- Up to a limit of 1024: the numbers from 1 to the limit that no running task of the
-- queue holds (held, read once), and no more of them than the limit less the running
-- tasks holding a slot (a lowered limit may leave tasks running on slots above it).
-- Lowest first: every claim takes its slots in one order, so two claims that want the
-- same slot never wait for each other in a cycle; the one that comes second fails at
-- once on the unique index and is retried.
--
-- Above 1024 (a limit that seldom binds) the running tasks are not read: the
-- candidates are random numbers, each probed in tasks_slots, and uniqueness alone
-- keeps the count at most the limit, since every slot is a number from 1 to it.  Only
-- while some task runs on a slot above the limit (it was lowered) are the running
-- tasks counted, as below 1024.  Two claims drawing one number: the second is retried.
-- (OFFSET 0 keeps each probe a lookup of its number: as an anti-join, a plan that
-- expects few numbers drawn may read every running task's slot once per number.)
--
-- With no limit, `limit` NULL slots.
WITH m AS (
    SELECT max_running AS n FROM shardq.queues WHERE name = %(queue)s
), held AS (
    SELECT held.slot AS s FROM shardq.tasks AS held
    WHERE held.queue = %(queue)s AND held.status = 'locked' AND held.slot IS NOT NULL
      AND (SELECT m.n FROM m) <= 1024
), drawn AS (
    SELECT DISTINCT (1 + floor(random() * m.n))::int4 AS s
    FROM m, generate_series(1, 2 * {limit})
    WHERE m.n > 1024
), room AS (
    SELECT CASE
        WHEN m.n <= 1024 THEN m.n - (SELECT count(*) FROM held)
        WHEN NOT EXISTS (
            SELECT 1 FROM shardq.tasks AS above
            WHERE above.queue = %(queue)s AND above.status = 'locked' AND above.slot > m.n)
        THEN m.n
        ELSE m.n - (SELECT count(*) FROM shardq.tasks AS running
                    WHERE running.queue = %(queue)s AND running.status = 'locked'
                      AND running.slot IS NOT NULL)
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
            WHERE taken.queue = %(queue)s AND taken.status = 'locked'
              AND taken.slot = drawn.s
            OFFSET 0)
    ) AS candidates(s)
) AS free
WHERE free.i <= (SELECT room.n FROM room)
UNION ALL
SELECT i, NULL::int4
FROM generate_series(1, {limit}) AS i
WHERE NOT EXISTS (SELECT 1 FROM m WHERE m.n IS NOT NULL)
