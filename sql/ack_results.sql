-- Finish tasks as ack_many does, and keep the results of those that asked for it, in
-- the same statement: a task is never done without its result.  A result is written
-- only for a task this statement deleted, and at most once (ON CONFLICT), so an ack
-- run again after its reply was lost finds its tasks gone and writes nothing twice.
-- On PostgreSQL the statement also wakes the clients waiting for these results
-- (results_notify).  It returns how many tasks it deleted, as ack_many does, and
-- records the attempt as ack_many does.  A result kept for a flow's later nodes
-- (keep_s infinite) is kept until its flow ends (shardq.loops.resolver).
WITH done AS (
    DELETE FROM shardq.tasks AS t
    USING unnest(%(ids)s::uuid[], %(tokens)s::uuid[]) AS a(id, lease_token)
    {locate}
    RETURNING t.id, t.queue, t.attempts, t.enqueued_at, t.times_claimed, t.last_claimed_at,
              t.worker_id, t.flow_id, t.flow_next, t.durable
), {acked}, kept AS (
    INSERT INTO shardq.results AS r
        (id, queue, value, error, attempts, enqueued_at, finished_at, expires_at, flow_id)
    SELECT done.id, done.queue, k.value::jsonb, k.error, done.attempts, done.enqueued_at,
           c.now,
           CASE WHEN k.keep_s = 'Infinity' THEN 'infinity'::timestamptz
                ELSE c.now + k.keep_s * interval '1 second' END,
           done.flow_id
    FROM done,
         unnest(%(kept_ids)s::uuid[], %(kept_values)s::text[], %(kept_errors)s::text[],
                %(keep_s)s::float8[]) AS k(id, value, error, keep_s),
         (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
    WHERE k.id = done.id
    ON CONFLICT (id) DO NOTHING
    RETURNING r.id
)
SELECT count(*), {results_notify} FROM done
