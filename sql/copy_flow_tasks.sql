-- Nodes of a flow that wait for nothing and share their options (the members of a
-- group, a chord or a batch) in COPY's binary format, built by the client
-- (shardq.ops.produce): the columns of copy_tasks, then the flow and the nodes that
-- wait for these.
COPY shardq.tasks
    (id, queue, payload, exec_time, priority, pending_head_start_s, max_attempts, enqueued_at,
     task_group, trace_context, flow_id, flow_next)
FROM STDIN (FORMAT binary)
