-- Wake the tasks parked on events just emitted: due now (a statement of its own, after
-- event_emit in the same transaction, so that it sees a park that event_emit waited
-- for).  Found through tasks_parked; a task already due is left alone.  Returns the
-- queues of the tasks woken, with how many each (and with notify, wakes workers).
WITH woken AS (
    UPDATE shardq.tasks AS t SET exec_time = c.now
    FROM (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
    WHERE t.parked = 'event'
      AND t.wait_event = ANY(%(names)s::text[])
      AND t.status = 'available'
      AND t.exec_time > c.now
    RETURNING t.queue
)
SELECT woken.queue, count(*) AS n, {flow_notify}
FROM woken
GROUP BY woken.queue
