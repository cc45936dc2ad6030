COPY shardq.tasks
    (id, queue, payload, exec_time, priority, pending_head_start_s, max_attempts, enqueued_at)
FROM STDIN (FORMAT BINARY)
