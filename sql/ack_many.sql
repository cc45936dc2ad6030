-- Delete finished tasks, each only if its lease token still matches, and count them
-- as completed (throughput_add) in the same statement.  It returns how many it deleted:
-- the caller looks for the others only when that falls short (shardq.settle.ack).
-- A task claimed before this attempt has attempts on record, and this one joins them
-- (attempts_add); a task that succeeds at once writes no history.
WITH done AS (
    DELETE FROM shardq.tasks AS t
    USING unnest(%(ids)s::uuid[], %(tokens)s::uuid[]) AS a(id, lease_token)
    {locate}
    RETURNING t.id, t.queue, t.times_claimed, t.last_claimed_at, t.worker_id
), n AS (
    SELECT done.queue, 0::int8 AS enqueued, count(*) AS completed FROM done GROUP BY done.queue
), counted AS (
    {throughput_add}
), ended AS (
    SELECT done.id, done.queue, done.times_claimed AS attempt, done.last_claimed_at AS claimed_at,
           done.worker_id, 'acked'::text AS outcome, NULL::text AS error
    FROM done WHERE done.times_claimed > 1
), recorded AS (
    {attempts_add}
)
SELECT count(*) FROM done
