-- Claim a bounded batch of eligible tasks of one queue from one bucket.
-- The CTE reads one index range of tasks_pkey (claim_where) in exec_time order and
-- stops at the limit: locked, dead and future rows lie outside that range and are
-- never read.  The limit is a literal so that a prepared (generic) plan knows the
-- scan is small.  MATERIALIZED keeps the planner from merging the CTE into the
-- UPDATE, and the locked rows are updated through their ctid, with no second index
-- descent.
WITH c AS MATERIALIZED (
    SELECT ctid
    FROM shardq.tasks
    WHERE {claim_where}
    ORDER BY exec_time
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
), clock AS (
    SELECT coalesce(%(now)s::timestamptz, now()) AS now
)
UPDATE shardq.tasks AS t SET
    {claim_set}
FROM c, clock
WHERE t.ctid = c.ctid
{claim_returning}
