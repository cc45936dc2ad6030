-- The first group after %(after)s (in name order) with a waiting task: one descent of
-- the partial index tasks_groups_waiting.  Groups take turns in this order, so each
-- waits for at most one turn of every other group.
SELECT task_group
FROM shardq.tasks
WHERE queue = %(queue)s AND status = 'available' AND task_group IS NOT NULL
  AND task_group > %(after)s
ORDER BY task_group
LIMIT 1
