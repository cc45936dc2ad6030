-- Claim a bounded batch of eligible tasks of one queue from one hash bucket.
-- The subquery's span is [/bucket/queue/'available' - .../now] of the primary
-- key (claim_where), read in exec_time order; SKIP LOCKED passes over rows other
-- claimers hold.  CockroachDB's locks are best-effort under SERIALIZABLE, so the
-- guarantee is the write: the row is re-checked as 'available' by the UPDATE.
UPDATE shardq.tasks AS t SET
    {claim_set}
FROM (
    SELECT queue, status, exec_time, id
    FROM shardq.tasks
    WHERE {claim_where}
    ORDER BY exec_time
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
) AS c, (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS clock
WHERE t.queue = c.queue
  AND t.status = c.status
  AND t.exec_time = c.exec_time
  AND t.id = c.id
{claim_returning}
