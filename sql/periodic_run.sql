-- Enqueue a schedule's task now, once, outside its schedule (the slot is now); its
-- last slot is left as it is.
INSERT INTO shardq.tasks
    (queue, payload, exec_time, priority, pending_head_start_s, max_attempts, enqueued_at)
SELECT src.queue,
       jsonb_build_object('task', src.task, 'args', jsonb_build_array(),
                          'kwargs', jsonb_build_object(),
                          'slot', p.now),
       p.exec_time, src.priority, p.pending_head_start_s, src.max_attempts, p.now
FROM (SELECT task, queue, priority, max_attempts, NULL::timestamptz AS run_at,
             NULL::float8 AS delay_s
      FROM shardq.periodic WHERE name = %(name)s) AS src
CROSS JOIN LATERAL ({placement}) AS p
RETURNING id, queue
