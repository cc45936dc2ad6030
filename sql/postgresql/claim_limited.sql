-- Claim a bounded batch of a flow-controlled queue's tasks from one index range
-- (claim_where with claim_range_ungrouped, _mixed or _group), giving each task a free
-- capacity slot under the queue's max_running and its group's max_running_per_group
-- (claim_free).  The free slots (f) are found first, and no more tasks (c) are locked
-- than there are free slots: under a binding limit, a claim that locked a whole batch
-- for the one slot free would hide the bucket's tasks from the claims beside it.  The
-- two are numbered and joined by that number.  The unique partial indexes tasks_slots
-- and tasks_group_slots make a slot that a concurrent claim took at the same moment
-- fail this statement (a unique violation, which the client reads as "nothing claimed,
-- try again"), never exceed the limit.  The rows locked are named again as an array of
-- ctids, so that whichever join the planner picks reads them alone: joined on the ctid
-- only, a custom plan may hash them and read the whole table to find them.
WITH f AS MATERIALIZED (
    {claim_free}
), c AS MATERIALIZED (
    SELECT due.ctid, row_number() OVER (ORDER BY due.exec_time) AS i
    FROM (
        SELECT ctid, exec_time
        FROM shardq.tasks
        WHERE {claim_where}
        ORDER BY exec_time
        LIMIT least({limit}, (SELECT count(*) FROM f))
        FOR UPDATE SKIP LOCKED
    ) AS due
), clock AS (
    SELECT coalesce(%(now)s::timestamptz, now()) AS now
)
UPDATE shardq.tasks AS t SET
    {claim_set}
FROM c JOIN f ON f.i = c.i, clock
WHERE t.ctid = c.ctid
  AND t.ctid = ANY(ARRAY(SELECT c.ctid FROM c))
{claim_returning}
