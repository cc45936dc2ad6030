-- Fire one slot of a schedule: move its last slot to %(slot)s and, when %(run)s, enqueue
-- its task, in one statement.  The update applies only if the row still has the last
-- slot and since this process read (a compare-and-set): of any number of processes
-- firing the same slot, one moves last_slot and enqueues, and the others update no row
-- and so insert nothing.  last_slot only moves forward, so a slot fires at most once.
WITH src AS (
    UPDATE shardq.periodic
    SET last_slot = %(slot)s::timestamptz
    WHERE name = %(name)s AND removed_at IS NULL AND since = %(since)s::timestamptz
      AND last_slot IS NOT DISTINCT FROM %(last_slot)s::timestamptz
    RETURNING task, queue, priority, max_attempts, %(slot)s::timestamptz AS run_at,
              NULL::float8 AS delay_s
)
INSERT INTO shardq.tasks
    (queue, payload, exec_time, priority, pending_head_start_s, max_attempts, enqueued_at)
SELECT src.queue,
       jsonb_build_object('task', src.task, 'args', jsonb_build_array(),
                          'kwargs', jsonb_build_object(),
                          'slot', src.run_at),
       p.exec_time, src.priority, p.pending_head_start_s, src.max_attempts, p.now
FROM src CROSS JOIN LATERAL ({placement}) AS p
WHERE %(run)s::bool
RETURNING id, queue
