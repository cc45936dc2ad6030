-- The limits of the queues named in %(queues)s, with whether each has waiting grouped
-- tasks (a probe of tasks_groups_waiting) and how much of each limit is in use: the
-- running tasks that hold a slot (tasks_slots) and the most any group holds
-- (tasks_group_slots).  A queue with no row has no limits.
SELECT n.name, q.max_running, q.max_running_per_group, q.rate_count, q.rate_period_s,
       q.rate_burst, q.rate_per_group_count, q.rate_per_group_period_s,
       q.rate_per_group_burst,
       EXISTS (SELECT 1 FROM shardq.tasks AS g
               WHERE g.queue = n.name AND g.status = 'available'
                 AND g.task_group IS NOT NULL) AS grouped,
       (SELECT count(*) FROM shardq.tasks AS r
        WHERE r.queue = n.name AND r.status = 'locked' AND r.slot IS NOT NULL) AS running,
       (SELECT max(c.n) FROM (
            SELECT count(*) AS n FROM shardq.tasks AS r
            WHERE r.queue = n.name AND r.status = 'locked' AND r.group_slot IS NOT NULL
            GROUP BY r.task_group) AS c) AS running_most_group

FROM unnest(%(queues)s::text[]) AS n(name)
LEFT JOIN shardq.queues AS q ON q.name = n.name
