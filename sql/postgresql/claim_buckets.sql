-- Claim a bounded batch of eligible tasks of one queue from several buckets in one
-- statement: the buckets whose enqueues were announced together (a worker coalesces a
-- burst of notifications into one claim, rather than one claim per task).  For each
-- listed bucket in turn, the LATERAL reads that bucket's index range of tasks_pkey
-- (claim_where, with the listed bucket in claim_range) in exec_time order, as the
-- claim of one bucket does; the outer LIMIT stops the loop once the limit is reached,
-- so no more rows than it are locked, and buckets after that point are not read.
WITH c AS MATERIALIZED (
    SELECT d.ctid
    FROM unnest(%(buckets)s::int4[]) AS listed(bucket),
    LATERAL (
        SELECT ctid
        FROM shardq.tasks
        WHERE {claim_where}
        ORDER BY exec_time
        LIMIT {limit}
        FOR UPDATE SKIP LOCKED
    ) AS d
    LIMIT {limit}
), clock AS (
    SELECT coalesce(%(now)s::timestamptz, now()) AS now
)
UPDATE shardq.tasks AS t SET
    {claim_set}
FROM c, clock
WHERE t.ctid = c.ctid
{claim_returning}
