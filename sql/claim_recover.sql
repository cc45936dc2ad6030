-- The tasks a claim of one bucket took under its lease token: a claim retried
-- after its reply was lost collects what the first attempt committed rather than
-- leaving it locked until the lease runs out.  Reads the bucket's locked tasks
-- (the partial index tasks_leases), which only a retry ever does.
SELECT {claim_columns}
FROM shardq.tasks AS t
WHERE t.{bucket} = %(bucket)s
  AND t.status = 'locked'
  AND t.lease_token = %(token)s::uuid
ORDER BY t.exec_time
