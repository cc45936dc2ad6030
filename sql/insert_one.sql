-- Insert one task; the database generates its id (and, on PostgreSQL, its bucket).
INSERT INTO shardq.tasks
    (queue, payload, exec_time, priority, pending_head_start_s, max_attempts, enqueued_at)
SELECT %(queue)s, %(payload)s, p.exec_time, %(priority)s, p.pending_head_start_s,
       %(max_attempts)s, p.now
FROM ({source}) AS src CROSS JOIN LATERAL ({placement}) AS p
RETURNING id, {bucket} AS bucket
