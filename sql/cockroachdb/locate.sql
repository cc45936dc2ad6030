-- Find each claimed task `a` by its primary key and match its lease token.
WHERE t.{bucket} = a.bucket
  AND t.queue = a.queue
  AND t.status = 'locked'
  AND t.exec_time = a.exec_time
  AND t.id = a.id
  AND t.lease_token = a.lease_token
