-- Checkpoint one durable call of a task (shardq.steps, keyed by task and name), fenced
-- by the claim's lease token: a run that lost its lease writes nothing, and learns it
-- (owned = 0).  The first write of a name wins: a step done is never overwritten,
-- a wait's 'waiting' row is completed in place.  The task is marked durable the first
-- time, so that the statement ending it deletes its checkpoints (steps_drop).
-- Returns whether the lease was held, whether this statement wrote the checkpoint, and
-- the checkpoint as stored now, which after a
-- lost reply (or beside another run of the task) is what the first write wrote.
-- The task is found by its id (tasks_ids) in a subquery with LIMIT, which the planner
-- neither flattens nor turns into a read of the partial index of locked tasks (see
-- locate).
WITH owner AS (
    SELECT r.id, r.durable
    FROM (SELECT t.id, t.durable, t.status, t.lease_token FROM shardq.tasks AS t
          WHERE t.id = %(id)s::uuid LIMIT 1) AS r
    WHERE r.status = 'locked' AND r.lease_token = %(token)s::uuid
), marked AS (
    UPDATE shardq.tasks AS t SET durable = true
    WHERE t.id = ANY(ARRAY(SELECT o.id FROM owner AS o WHERE o.durable IS NOT TRUE))
    RETURNING t.id
), saved AS (
    INSERT INTO shardq.steps AS s (task_id, name, kind, state, value, until, at)
    SELECT o.id, %(name)s::text, %(kind)s::text, %(state)s::text, %(value)s::jsonb,
           %(until)s::timestamptz, coalesce(%(now)s::timestamptz, now())
    FROM owner AS o
    ON CONFLICT (task_id, name) DO UPDATE SET
        state = EXCLUDED.state, value = EXCLUDED.value, until = EXCLUDED.until,
        at = EXCLUDED.at
    WHERE s.state = 'waiting'
    RETURNING s.state, s.value::text
)
SELECT (SELECT count(*) FROM owner) AS owned, (SELECT count(*) FROM saved) AS wrote,
       coalesce((SELECT saved.state FROM saved), s.state) AS state,
       coalesce((SELECT saved.value FROM saved), s.value::text) AS value
FROM (SELECT 1) AS one
LEFT JOIN shardq.steps AS s ON s.task_id = %(id)s::uuid AND s.name = %(name)s::text
