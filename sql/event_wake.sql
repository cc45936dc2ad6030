-- Wake the tasks parked on events just emitted: due now (a statement of its own, after
-- event_emit in the same transaction, so that it sees a park that event_emit waited
-- for).  Found through tasks_parked; a task already due is left alone.  Each woken
-- task's wait is completed here with the event's payload (its checkpoint, 'waiting'
-- since it parked): its next run finds it done, and asks for nothing more.  Returns
-- the queues of the tasks woken, with how many each (and with notify, wakes workers).
WITH woken AS (
    UPDATE shardq.tasks AS t SET exec_time = c.now
    FROM (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
    WHERE t.parked = 'event'
      AND t.wait_event = ANY(%(names)s::text[])
      AND t.status = 'available'
      AND t.exec_time > c.now
    RETURNING t.id, t.queue, t.wait_event
), completed AS (
    UPDATE shardq.steps AS s SET state = 'done', value = e.payload,
                                 at = coalesce(%(now)s::timestamptz, now())
    FROM woken AS w
    JOIN shardq.events AS e ON e.name = w.wait_event AND e.emitted_at IS NOT NULL
    WHERE s.task_id = w.id
      AND s.kind = 'event'
      AND s.state = 'waiting'
      AND s.value ->> 'event' = w.wait_event
)
SELECT woken.queue, count(*) AS n, {flow_notify}
FROM woken
GROUP BY woken.queue
