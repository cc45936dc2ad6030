-- A durable task's checkpoints, for its record (shardq.TaskInfo.steps): one range of
-- the key of shardq.steps, the task's, in the order they were last written.
SELECT s.name, s.kind, s.state, s.value, s.until, s.at
FROM shardq.steps AS s
WHERE s.task_id = %(id)s::uuid
ORDER BY s.at, s.name
