-- Where tasks a settle statement did not touch are now (one probe of tasks_ids each):
-- their status and lease token.  A task that is gone, or back in line under the
-- token it was claimed with, was settled by an earlier attempt whose reply was lost.
SELECT t.id, t.status, t.lease_token
FROM shardq.tasks AS t
WHERE t.id = ANY(%(ids)s::uuid[])
