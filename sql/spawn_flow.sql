-- The flow of a durable task's children (kind 'spawn', keyed by the task's id), written
-- with the child it counts (ctx.spawn), fenced by the task's lease token: a run that
-- lost its lease spawns nothing (no row returned).  The task is found by its id
-- (tasks_ids), as step_save finds it.  A flow that ended is open again.
INSERT INTO shardq.flows AS f (id, kind, name, nodes, keep_result_s, created_at)
SELECT t.id, 'spawn', %(name)s::text, 1, %(keep_result_s)s::float8,
       coalesce(%(now)s::timestamptz, now())
FROM (SELECT t.id, t.status, t.lease_token FROM shardq.tasks AS t
      WHERE t.id = %(id)s::uuid LIMIT 1) AS t
WHERE t.status = 'locked' AND t.lease_token = %(token)s::uuid
ON CONFLICT (id) DO UPDATE SET nodes = f.nodes + 1, finished_at = NULL
RETURNING f.id
