-- Cancel a flow (its row locked by flow_lock): every node not finished is deleted,
-- waiting, due, running (its worker finds the row gone at its next heartbeat and
-- drops its result; the attempt is recorded as cancelled, attempts_add) or dead; its
-- events not folded in are moot and deleted; the flow counts them as cancelled and
-- ends now (its results stay until the janitor deletes it, keep_result_s later:
-- flow_purge).  Returns how many nodes were cancelled.
WITH gone AS (
    DELETE FROM shardq.tasks AS t
    WHERE t.flow_id = %(id)s::uuid
    RETURNING t.id, t.status, t.queue, t.times_claimed, t.last_claimed_at, t.worker_id
), ended AS (
    SELECT g.id, g.queue, g.times_claimed AS attempt, g.last_claimed_at AS claimed_at,
           g.worker_id, 'cancelled'::text AS outcome, NULL::text AS error
    FROM gone AS g WHERE g.status = 'locked'
), recorded AS (
    {attempts_add}
), moot AS (
    -- A flow with no node left (none gone) is left alone: its last nodes ended, and the
    -- resolver ends it as they did, their events its counts.
    DELETE FROM shardq.flow_events AS e
    WHERE e.flow_id = %(id)s::uuid AND EXISTS (SELECT 1 FROM gone)
), clock AS (
    SELECT coalesce(%(now)s::timestamptz, now()) AS now WHERE EXISTS (SELECT 1 FROM gone)
), flow AS (
    UPDATE shardq.flows AS f SET
        cancelled = f.cancelled + (SELECT count(*) FROM gone),
        cancelled_at = clock.now,
        finished_at = clock.now
    FROM clock
    WHERE f.id = %(id)s::uuid
)
SELECT count(*) FROM gone
