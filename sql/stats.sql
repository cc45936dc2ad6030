-- Counts of one queue's tasks by state, and the age of its oldest eligible task.
SELECT
    count(*) FILTER (WHERE status = 'available' AND exec_time <= c.now) AS available,
    count(*) FILTER (WHERE status = 'available' AND exec_time > c.now) AS scheduled,
    count(*) FILTER (WHERE status = 'locked') AS locked,
    count(*) FILTER (WHERE status = 'dead') AS dead,
    extract(epoch FROM c.now - min(exec_time) FILTER (
        WHERE status = 'available' AND exec_time <= c.now))::float8 AS oldest_eligible_age_s
FROM shardq.tasks, (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
WHERE queue = %(queue)s
GROUP BY c.now
