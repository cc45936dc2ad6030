-- The tasks a limited claim took under its lease token, from whichever buckets they
-- lie in (a group's claim reads across buckets), as claim_recover does for one bucket:
-- one short range of the primary key per bucket, the queue's running tasks.  Only a
-- retry after a lost reply reads it.
SELECT {claim_columns}
FROM shardq.tasks AS t
WHERE t.{bucket} = ANY(%(buckets)s)
  AND t.queue = %(queue)s
  AND t.status = 'locked'
  AND t.lease_token = %(token)s::uuid
ORDER BY t.exec_time
