-- A layout's index of the tasks held under a lease, by bucket and expiry (as
-- tasks_leases is for the stored bucket): the janitor's range per bucket.
CREATE INDEX CONCURRENTLY {index} ON shardq.tasks (({bucket}), exec_time, id)
WHERE status = 'locked'
