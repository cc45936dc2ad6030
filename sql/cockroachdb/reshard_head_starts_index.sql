-- A layout's index of the tasks with a head start still to apply, led by the layout's
-- shard column: the janitor's promotion range.
CREATE INDEX IF NOT EXISTS {index} ON shardq.tasks ({bucket}, exec_time)
WHERE pending_head_start_s > 0
