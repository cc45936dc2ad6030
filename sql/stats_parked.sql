-- Parked tasks not yet due, by reason and queue, for the queue figures (a woken task is
-- due: it is counted with the due ones).  Read through tasks_parked, which holds the
-- parked tasks alone: one range of it per reason, at most "limit" entries of each, so
-- the cost is bounded however many tasks are parked.  Taken in the index's order, so
-- that the planner reads a long range in order up to the cap rather than whole (a
-- short one it may read whole, and sort).  The index does not hold the queue, so each
-- entry read is looked up in the table, and every queue is counted at once.  Returned
-- per reason and queue found: the tasks waiting, and the entries read (shardq.queuestats
-- sums them per reason: at the cap, that reason's counts only say "at least this many",
-- and are estimated).
SELECT r.reason, p.queue, p.n, p.read
FROM (VALUES ('sleep'), ('event'), ('children')) AS r(reason)
CROSS JOIN (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
CROSS JOIN LATERAL (
    SELECT x.queue,
           count(*) FILTER (WHERE x.status = 'available' AND x.exec_time > c.now) AS n,
           count(*) AS read
    FROM (SELECT t.queue, t.status, t.exec_time
          FROM shardq.tasks AS t
          WHERE t.parked = r.reason AND t.parked IS NOT NULL
          ORDER BY t.parked, t.wait_event
          LIMIT {limit}) AS x
    GROUP BY x.queue
) AS p
