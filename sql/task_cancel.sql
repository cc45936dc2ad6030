-- Cancel a task that waits or runs: its row is deleted (found through tasks_ids).
-- A running task's worker finds the row gone at its next heartbeat, tells the
-- handler (shardq.current().cancelled) and drops its result.  Dead tasks are left
-- to the dead-letter calls.  Returns the status the task had.
DELETE FROM shardq.tasks
WHERE id = %(id)s::uuid AND status IN ('available', 'locked')
RETURNING status
