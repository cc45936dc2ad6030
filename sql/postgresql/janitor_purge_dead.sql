-- Retention: delete a bounded batch of one bucket's tasks that have been dead
-- longer than dead_retention_s.  The bucket's queues are found with a loose
-- index scan (one probe per queue), then each queue's dead range is read
-- oldest first, so live tasks are never scanned.  A node of a flow dropped is an
-- event for the flows' resolver (flow_events_add).
WITH RECURSIVE queues AS (
    (SELECT queue FROM shardq.tasks WHERE {bucket} = %(bucket)s ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT t.queue FROM shardq.tasks AS t
            WHERE t.{bucket} = %(bucket)s AND t.queue > q.queue ORDER BY t.queue LIMIT 1)
    FROM queues AS q
    WHERE q.queue IS NOT NULL
), doomed AS (
    SELECT d.ctid
    FROM queues AS q
    CROSS JOIN LATERAL (
        SELECT t.ctid FROM shardq.tasks AS t
        WHERE t.{bucket} = %(bucket)s AND t.queue = q.queue AND t.status = 'dead'
          AND t.exec_time <= coalesce(%(now)s::timestamptz, now())
                             - %(dead_retention_s)s::float8 * interval '1 second'
        ORDER BY t.exec_time
        LIMIT {limit}
    ) AS d
    WHERE q.queue IS NOT NULL
    LIMIT {limit}
), gone AS (
    DELETE FROM shardq.tasks
    WHERE ctid = ANY(ARRAY(SELECT ctid FROM doomed))
    RETURNING id, flow_id, flow_next, durable
), flow_ended AS (
    SELECT g.flow_id, g.id, 'dropped'::text AS outcome, g.flow_next AS next FROM gone AS g
), flowed AS (
    {flow_events_add}
), steps_ended AS (
    SELECT g.id FROM gone AS g WHERE g.durable
), stepped AS (
    {steps_drop}
)
SELECT gone.id, 'purged' FROM gone
