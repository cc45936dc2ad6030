-- Record attempts that ended, as part of the statement that ended them: the rows of
-- the CTE `ended` (id, queue, attempt, claimed_at, worker_id, outcome, error) the
-- statement defines, with the worker's name, host and pid copied from shardq.workers so
-- that they outlive its row.  A task keeps its latest attempts_kept attempts: an
-- attempt's slot is its number modulo that, and a later attempt replaces the earlier
-- one of its slot.  The statement that ends an attempt touches the task only while it
-- is locked under the claim's lease token, so run again after its reply was lost it
-- ends nothing and records nothing; nor does an attempt replace itself.
INSERT INTO shardq.attempts AS h
    (task_id, slot, attempt, queue, claimed_at, ended_at, outcome, error, worker_id,
     worker_name, worker_host, worker_pid)
SELECT e.id, mod(e.attempt - 1, %(attempts_kept)s::int4), e.attempt, e.queue, e.claimed_at,
       coalesce(%(now)s::timestamptz, now()), e.outcome, e.error, e.worker_id, w.name, w.host,
       w.pid
FROM ended AS e
LEFT JOIN shardq.workers AS w ON w.id = e.worker_id
ON CONFLICT (task_id, slot) DO UPDATE SET
    attempt = EXCLUDED.attempt,
    queue = EXCLUDED.queue,
    claimed_at = EXCLUDED.claimed_at,
    ended_at = EXCLUDED.ended_at,
    outcome = EXCLUDED.outcome,
    error = EXCLUDED.error,
    worker_id = EXCLUDED.worker_id,
    worker_name = EXCLUDED.worker_name,
    worker_host = EXCLUDED.worker_host,
    worker_pid = EXCLUDED.worker_pid
WHERE h.attempt < EXCLUDED.attempt
