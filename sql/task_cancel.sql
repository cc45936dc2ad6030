-- Cancel a task that waits or runs: its row is deleted (found through tasks_ids).
-- A running task's worker finds the row gone at its next heartbeat, tells the
-- handler (shardq.current().cancelled) and drops its result; its attempt is recorded
-- as cancelled (attempts_add).  A node of a flow that waits for others is cancelled
-- the same way, and a node's cancellation is an event for the flows' resolver
-- (flow_events_add): the nodes that wait for it are cancelled in turn.  Dead tasks
-- are left to the dead-letter calls.
-- Returns the status the task had.
WITH gone AS (
    DELETE FROM shardq.tasks AS t
    WHERE t.id = %(id)s::uuid AND t.status IN ('available', 'locked', 'waiting')
    RETURNING t.id, t.status, t.queue, t.times_claimed, t.last_claimed_at, t.worker_id,
              t.flow_id, t.flow_next, t.durable
), ended AS (
    SELECT g.id, g.queue, g.times_claimed AS attempt, g.last_claimed_at AS claimed_at,
           g.worker_id, 'cancelled'::text AS outcome, NULL::text AS error
    FROM gone AS g WHERE g.status = 'locked'
), recorded AS (
    {attempts_add}
), flow_ended AS (
    SELECT g.flow_id, g.id, 'cancelled'::text AS outcome, g.flow_next AS next FROM gone AS g
), flowed AS (
    {flow_events_add}
), steps_ended AS (
    SELECT g.id FROM gone AS g WHERE g.durable
), stepped AS (
    {steps_drop}
)
SELECT gone.status FROM gone
