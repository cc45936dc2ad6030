-- The insert of a staged merge whose tasks form one batch with a completion callback
-- (write_tasks or write_stream_tasks with on_complete): placed as insert_rows places
-- them, and each names the batch's flow and, in flow_next, the callback that waits for
-- them all (opened in the merge's transaction, shardq.ops.batches).  No row coalesces:
-- such a write takes no key, so each row returned is a task of the batch.
INSERT INTO shardq.tasks AS t
    (id, queue, payload, exec_time, priority, pending_head_start_s, max_attempts,
     enqueued_at, task_group, trace_context, flow_id, flow_next)
SELECT src.id, src.queue, src.payload, p.exec_time, src.priority, p.pending_head_start_s,
       src.max_attempts, p.now, src.task_group, src.trace_context, %(flow_id)s::uuid,
       ARRAY[%(callback_id)s::uuid]
FROM ({rows}) AS src CROSS JOIN LATERAL ({placement}) AS p
RETURNING t.id
