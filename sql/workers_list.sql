-- Every registered worker, whether it was seen within worker_stale_s, and how many
-- tasks it holds: the claimed tasks (the partial index tasks_leases holds them, as
-- many as the workers have in flight) counted by worker.
SELECT w.id, w.name, w.host, w.pid, w.queues, w.started_at, w.last_seen_at,
       w.last_seen_at > c.now - %(worker_stale_s)s::float8 * interval '1 second' AS alive,
       coalesce(h.holding, 0) AS holding
FROM shardq.workers AS w
CROSS JOIN (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
LEFT JOIN (
    SELECT t.worker_id, count(*) AS holding
    FROM shardq.tasks AS t
    WHERE t.status = 'locked' AND t.worker_id IS NOT NULL
    GROUP BY t.worker_id
) AS h ON h.worker_id = w.id
ORDER BY w.name, w.started_at, w.id
