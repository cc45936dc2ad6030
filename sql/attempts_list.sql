-- A task's attempts, oldest first: those that ended (shardq.attempts, one range of its
-- primary key), and the one running now, if the task is claimed (one probe of
-- tasks_ids: a subquery with LIMIT, so the planner cannot read the partial index of
-- locked tasks instead, see locate), with its worker's name, host and pid while the
-- worker's row lasts.
SELECT h.attempt, h.outcome, h.claimed_at, h.ended_at, h.error, h.worker_id, h.worker_name,
       h.worker_host, h.worker_pid
FROM shardq.attempts AS h
WHERE h.task_id = %(id)s::uuid
UNION ALL
SELECT t.times_claimed, 'running', t.last_claimed_at, NULL, NULL, t.worker_id, w.name,
       w.host, w.pid
FROM (SELECT r.status, r.times_claimed, r.last_claimed_at, r.worker_id
      FROM shardq.tasks AS r WHERE r.id = %(id)s::uuid LIMIT 1) AS t
LEFT JOIN shardq.workers AS w ON w.id = t.worker_id
WHERE t.status = 'locked'
ORDER BY 1
