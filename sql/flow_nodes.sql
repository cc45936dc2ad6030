-- A bounded page of the nodes of one flow, in the order they were enqueued: those still in
-- shardq.tasks (through tasks_flows) with their state, and those that succeeded and
-- kept a result (through results_flows).  Nodes cancelled, and nodes of a batch that
-- succeeded without a result, are counted by the flow's row, not listed.
SELECT n.id, n.queue, n.task, n.state, n.attempts, n.error, n.enqueued_at, n.finished_at,
       n.waits
FROM (
    SELECT t.id, t.queue, t.payload ->> 'task' AS task,
           CASE t.status WHEN 'locked' THEN 'running' WHEN 'available' THEN 'pending'
                         ELSE t.status END AS state,
           t.attempts, t.last_error AS error, t.enqueued_at,
           CASE WHEN t.status = 'dead' THEN t.exec_time END AS finished_at, t.waits
    FROM shardq.tasks AS t
    WHERE t.flow_id = %(id)s::uuid
    UNION ALL
    SELECT r.id, r.queue, NULL, 'succeeded', r.attempts, r.error, r.enqueued_at,
           r.finished_at, NULL
    FROM shardq.results AS r
    WHERE r.flow_id = %(id)s::uuid
) AS n
ORDER BY n.enqueued_at, n.id
LIMIT {limit}
