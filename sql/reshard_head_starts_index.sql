-- A layout's index of the tasks with a head start still to apply, by bucket (as
-- tasks_head_starts is for the stored bucket): the janitor's promotion range.
CREATE INDEX CONCURRENTLY {index} ON shardq.tasks (({bucket}), exec_time)
WHERE pending_head_start_s > 0
