-- Find each claimed task `a` by its own primary-key probe, then match its lease
-- token.  A LATERAL subquery with LIMIT is never flattened into a join: as a
-- plain join, the planner (trusting statistics taken when few tasks were
-- claimed) may read every locked row of the table for each batch.
CROSS JOIN LATERAL (
    SELECT r.ctid
    FROM shardq.tasks AS r
    WHERE r.bucket = a.bucket
      AND r.queue = a.queue
      AND r.status = 'locked'
      AND r.exec_time = a.exec_time
      AND r.id = a.id
    LIMIT 1
) AS located
WHERE t.ctid = located.ctid
  AND t.lease_token = a.lease_token
