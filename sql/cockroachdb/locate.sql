-- Find each claimed task `a` by its id (the unique index tasks_ids) and match its
-- lease token.
WHERE t.id = a.id
  AND t.lease_token = a.lease_token
  AND t.status = 'locked'
