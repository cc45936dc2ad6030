-- A task's attempts, oldest first: those that ended (shardq.attempts, one range of its
-- primary key), and the one running now, if the task is claimed (one probe of
-- tasks_ids), with its worker's name, host and pid while the worker's row lasts.
SELECT h.attempt, h.outcome, h.claimed_at, h.ended_at, h.error, h.worker_id, h.worker_name,
       h.worker_host, h.worker_pid
FROM shardq.attempts AS h
WHERE h.task_id = %(id)s::uuid
UNION ALL
SELECT t.times_claimed, 'running', t.last_claimed_at, NULL, NULL, t.worker_id, w.name,
       w.host, w.pid
FROM shardq.tasks AS t
LEFT JOIN shardq.workers AS w ON w.id = t.worker_id
WHERE t.id = %(id)s::uuid AND t.status = 'locked'
ORDER BY 1
