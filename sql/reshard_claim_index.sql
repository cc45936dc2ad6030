-- A layout's claim index: one bucket's tasks of a queue and status in exec_time order,
-- as tasks_pkey is for the stored bucket.  Built without blocking writers.
CREATE INDEX CONCURRENTLY {index} ON shardq.tasks (({bucket}), queue, status, exec_time, id)
