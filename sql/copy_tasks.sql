-- A batch of new tasks in COPY's binary format, built by the client (shardq.produce).
COPY shardq.tasks
    (id, queue, payload, exec_time, priority, pending_head_start_s, max_attempts, enqueued_at,
     task_group, trace_context)
FROM STDIN (FORMAT binary)
