-- Insert tasks from a row source (the rows fragment) with columns id, queue, key, payload,
-- run_at, delay_s, priority, max_attempts, task_group, trace_context (at most one row
-- per key).  A keyed row whose key already has a waiting task coalesces into it: the
-- latest payload wins and so does the earlier place in line; the trace context goes
-- with the payload (the task runs the latest enqueue's work, in its trace).  Returns
-- the id of the task each row became: its own when inserted, the waiting task's when
-- coalesced.
INSERT INTO shardq.tasks AS t
    (id, queue, key, payload, exec_time, priority, pending_head_start_s, max_attempts,
     enqueued_at, task_group, trace_context)
SELECT src.id, src.queue, src.key, src.payload, p.exec_time, src.priority,
       p.pending_head_start_s, src.max_attempts, p.now, src.task_group, src.trace_context
FROM ({rows}) AS src CROSS JOIN LATERAL ({placement}) AS p
ON CONFLICT (queue, key) WHERE key IS NOT NULL AND status = 'available'
DO UPDATE SET
    payload = EXCLUDED.payload,
    trace_context = EXCLUDED.trace_context,
    exec_time = least(t.exec_time, EXCLUDED.exec_time),
    pending_head_start_s = CASE WHEN EXCLUDED.exec_time < t.exec_time
                                THEN EXCLUDED.pending_head_start_s
                                ELSE t.pending_head_start_s END,
    priority = CASE WHEN EXCLUDED.exec_time < t.exec_time
                    THEN EXCLUDED.priority ELSE t.priority END
RETURNING t.id, t.key
