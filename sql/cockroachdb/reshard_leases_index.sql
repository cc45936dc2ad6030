-- A layout's index of the tasks held under a lease, led by the layout's shard column
-- (as tasks_leases is led by the primary key's): the janitor's range per bucket.
CREATE INDEX IF NOT EXISTS {index} ON shardq.tasks ({bucket}, exec_time, id)
WHERE status = 'locked'
