-- Give dead tasks a new life: eligible now, attempts from zero, last error kept.
-- Picks tasks by id (ids given) or a whole queue (ids NULL).  A keyed task whose
-- key already has a waiting task stays dead (it would duplicate that task).  A node of
-- a flow that comes back is an event for the flows' resolver (flow_events_add): its
-- flow runs on once it succeeds.
WITH revived AS (
    UPDATE shardq.tasks AS t SET
        status = 'available',
        exec_time = c.now,
        attempts = 0,
        times_requeued = t.times_requeued + 1,
        last_requeued_at = c.now
    FROM (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
    WHERE t.{bucket} = ANY(%(buckets)s::int2[])
      AND (%(queue)s::text IS NULL OR t.queue = %(queue)s)
      AND t.status = 'dead'
      AND (%(ids)s::uuid[] IS NULL OR t.id = ANY(%(ids)s::uuid[]))
      AND (t.key IS NULL OR NOT EXISTS (
          SELECT 1 FROM shardq.tasks AS w
          WHERE w.queue = t.queue AND w.key = t.key AND w.status = 'available'))
    RETURNING t.id, t.flow_id, t.flow_next
), flow_ended AS (
    SELECT r.flow_id, r.id, 'retried'::text AS outcome, r.flow_next AS next FROM revived AS r
), flowed AS (
    {flow_events_add}
)
SELECT revived.id FROM revived
