-- Failed tasks: back in line after the backoff (or the delay the worker asked
-- for), or dead once they used up max_attempts or when the worker says so.
-- Checks each lease token, and keeps it on the row: a retry of this statement after
-- its reply was lost finds the task no longer locked but still bearing the token,
-- which tells it the failure was recorded (shardq.settle, settled_check).  Each
-- attempt is recorded (attempts_add), failed or dead, with its error; a node of a flow
-- that dies leaves an event for the flows' resolver (flow_events_add).
WITH failed AS (
    UPDATE shardq.tasks AS t SET
        status = CASE WHEN a.dead OR t.attempts >= t.max_attempts THEN 'dead' ELSE 'available' END,
        exec_time = CASE
            WHEN a.dead OR t.attempts >= t.max_attempts THEN c.now
            WHEN a.retry_in_s IS NOT NULL THEN c.now + a.retry_in_s * interval '1 second'
            ELSE c.now + {backoff} END,
        last_error = a.error,
        -- A task that dies is not put back in line: only a retry counts as a requeue.
        times_requeued = t.times_requeued
            + CASE WHEN a.dead OR t.attempts >= t.max_attempts THEN 0 ELSE 1 END,
        last_requeued_at = CASE WHEN a.dead OR t.attempts >= t.max_attempts
                                THEN t.last_requeued_at ELSE c.now END
    FROM unnest(%(ids)s::uuid[], %(tokens)s::uuid[], %(errors)s::text[],
                %(retry_in_s)s::float8[], %(dead)s::bool[])
             AS a(id, lease_token, error, retry_in_s, dead),
         (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
    {locate}
    RETURNING t.id, t.status, t.queue, t.times_claimed, t.last_claimed_at, t.worker_id,
              t.last_error, t.flow_id, t.flow_next
), ended AS (
    SELECT f.id, f.queue, f.times_claimed AS attempt, f.last_claimed_at AS claimed_at,
           f.worker_id, CASE WHEN f.status = 'dead' THEN 'dead' ELSE 'failed' END AS outcome,
           f.last_error AS error
    FROM failed AS f
), recorded AS (
    {attempts_add}
), flow_ended AS (
    SELECT f.flow_id, f.id, 'dead'::text AS outcome, f.flow_next AS next
    FROM failed AS f WHERE f.status = 'dead'
), flowed AS (
    {flow_events_add}
)
SELECT failed.id, failed.status FROM failed
