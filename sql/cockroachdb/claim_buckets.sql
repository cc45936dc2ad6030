-- Claim a bounded batch of eligible tasks of one queue from several hash buckets in
-- one statement: the buckets whose enqueues were announced together.  For each listed
-- bucket in turn, the LATERAL's span is [/bucket/queue/'available' - .../now] of the
-- primary key (claim_where, with the listed bucket in claim_range), read in exec_time
-- order; the outer LIMIT stops once the limit is reached.  As in claim, the UPDATE
-- re-checks each row as 'available' (locks are best-effort under SERIALIZABLE).
UPDATE shardq.tasks AS t SET
    {claim_set}
FROM (
    SELECT d.queue, d.status, d.exec_time, d.id
    FROM unnest(%(buckets)s::INT8[]) AS listed(bucket),
    LATERAL (
        SELECT queue, status, exec_time, id
        FROM shardq.tasks
        WHERE {claim_where}
        ORDER BY exec_time
        LIMIT {limit}
        FOR UPDATE SKIP LOCKED
    ) AS d
    LIMIT {limit}
) AS c, (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS clock
WHERE t.queue = c.queue
  AND t.status = c.status
  AND t.exec_time = c.exec_time
  AND t.id = c.id
{claim_returning}
