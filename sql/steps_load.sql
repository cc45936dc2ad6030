-- A durable task's checkpoints, read once per run at its first durable call (the key
-- of shardq.steps, one range), with the server's clock: a sleep's or a wait's deadline
-- is compared with the clock that wakes the task, not with the worker's.  One row
-- even for a task without checkpoints (its name NULL).
SELECT c.now, s.name, s.kind, s.state, s.value::text, s.until
FROM (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
LEFT JOIN shardq.steps AS s ON s.task_id = %(id)s::uuid
