-- Free slots under one running limit, read from shardq.queues by this very statement
-- (a worker's cached limits only choose the statement): the queue's max_running, whose
-- running tasks hold a `slot` (holders_queue; the unique partial index tasks_slots),
-- or the claim's group's max_running_per_group, whose running tasks hold a
-- `group_slot` (holders_group; tasks_group_slots).  claim_free composes it once for
-- each (shardq.ops.flow.QUEUE_FREE and GROUP_FREE name the column, the limit and the
-- holders).  The unique index keeps the limit: two running tasks never hold one slot.
--
-- Up to LISTED_SLOTS (shardq/ops/flow.py, bound in as a literal): the numbers from 1
-- to the limit that no running holder holds (held, read once), and no more of them
-- than the limit less the running holders holding a slot (a lowered limit may leave
-- tasks running on slots above it).
-- Lowest first: every claim takes its slots in one order, so two claims that want the
-- same slot never wait for each other in a cycle; the one that comes second fails at
-- once on the unique index and is retried.
--
-- Above LISTED_SLOTS (a limit that seldom binds) the running tasks are not read: the
-- candidates are `draws` random numbers (enough for the claim at the share of the limit
-- in use when the worker last read it: shardq.ops.flow.draws; each costs a probe, and a
-- claim that finds too few free takes fewer tasks), each probed in the unique index, and uniqueness alone
-- keeps the count at most the limit, since every slot is a number from 1 to it.  Only
-- while some task runs on a slot above the limit (it was lowered) are the running
-- tasks counted, as below LISTED_SLOTS.  Two claims drawing one number: the second is
-- retried.  (OFFSET 0 keeps each probe a lookup of its number: as an anti-join, a plan
-- that expects few numbers drawn may read every running task's slot once per number.)
--
-- With no limit, `limit` NULL slots.
WITH m AS (
    SELECT {capacity} AS n FROM shardq.queues WHERE name = %(queue)s
), held AS (
    SELECT held.{slot} AS s FROM shardq.tasks AS held
    WHERE {holders} AND held.{slot} IS NOT NULL
      AND (SELECT m.n FROM m) <= {listed_slots}
), drawn AS (
    SELECT DISTINCT (1 + floor(random() * m.n))::int4 AS s
    FROM m, generate_series(1, %(draws)s::int4)
    WHERE m.n > {listed_slots}
), room AS (
    SELECT CASE
        WHEN m.n <= {listed_slots} THEN m.n - (SELECT count(*) FROM held)
        WHEN NOT EXISTS (
            SELECT 1 FROM shardq.tasks AS above
            WHERE {holders} AND above.{slot} > m.n)
        THEN m.n
        ELSE m.n - (SELECT count(*) FROM shardq.tasks AS running
                    WHERE {holders} AND running.{slot} IS NOT NULL)
    END AS n
    FROM m
)
SELECT free.i, free.s AS slot
FROM (
    SELECT row_number() OVER (ORDER BY candidates.s) AS i, candidates.s
    FROM (
        (SELECT s FROM m, generate_series(1, m.n) AS s WHERE m.n <= {listed_slots}
         EXCEPT
         SELECT s FROM held)
        UNION ALL
        SELECT drawn.s FROM drawn
        WHERE NOT EXISTS (
            SELECT 1 FROM shardq.tasks AS taken
            WHERE {holders} AND taken.{slot} = drawn.s
            OFFSET 0)
    ) AS candidates(s)
) AS free
WHERE free.i <= (SELECT room.n FROM room)
UNION ALL
SELECT i, NULL::int4
FROM generate_series(1, {limit}) AS i
WHERE NOT EXISTS (SELECT 1 FROM m WHERE m.n IS NOT NULL)
