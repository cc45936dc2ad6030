-- Insert one task under the id the client made (the database computes its bucket on
-- PostgreSQL).  A retry after a lost reply finds the id taken and inserts nothing.
INSERT INTO shardq.tasks
    (id, queue, payload, exec_time, priority, pending_head_start_s, max_attempts, enqueued_at,
     task_group, trace_context)
SELECT %(id)s::uuid, %(queue)s, %(payload)s, p.exec_time, %(priority)s, p.pending_head_start_s,
       %(max_attempts)s, p.now, %(group)s::text, %(trace_context)s::text
FROM ({source}) AS src CROSS JOIN LATERAL ({placement}) AS p
ON CONFLICT (id) DO NOTHING
RETURNING id, {bucket} AS bucket
