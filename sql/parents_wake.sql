-- Wake the durable tasks parked on their children whose events a fold just took in
-- (shardq.loops.resolver): due now, to look at their children again.  A parent's
-- children's flow has the parent's id; the fold holds that flow's lock, which a parent
-- takes as it parks (park_many), so a parent parking meanwhile either saw these
-- events or is found here.  Returns the queues woken, with how many each (and with
-- notify, wakes workers).
WITH woken AS (
    UPDATE shardq.tasks AS t SET exec_time = c.now
    FROM (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
    WHERE t.id = ANY(%(ids)s::uuid[])
      -- Not a condition tasks_parked could serve: probing tasks_ids for these ids is
      -- cheaper than reading every parent's entry there (the planner ANDed the two).
      AND coalesce(t.parked, '') = 'children'
      AND t.status = 'available'
      AND t.exec_time > c.now
    RETURNING t.queue
)
SELECT woken.queue, count(*) AS n, {flow_notify}
FROM woken
GROUP BY woken.queue
