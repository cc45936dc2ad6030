-- Delete the checkpoints of durable tasks, as part of the statement that ended them: the
-- rows of the CTE `steps_ended` (id) the statement defines, its tasks that have
-- checkpoints (tasks.durable).  A plain task names none, so the probe of steps' key
-- reads nothing for it.
DELETE FROM shardq.steps AS s
WHERE s.task_id = ANY(ARRAY(SELECT e.id FROM steps_ended AS e))
