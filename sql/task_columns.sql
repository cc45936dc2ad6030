-- The columns of a task's record (shardq.TaskInfo) read from `t`, with its state:
-- scheduled is an available task that is not yet due, parked one that is not yet due
-- because a durable call waits (a woken task is due: available).  A task of a flow
-- names it (flow_id), and one that waits for others counts them (waits).  A parked
-- task says what it waits for (parked, wait_event); a durable one that it has
-- checkpoints to read (durable).
t.id, t.queue, t.{bucket} AS bucket, t.status, t.exec_time, t.payload, t.key,
       t.priority, t.pending_head_start_s, t.attempts, t.max_attempts, t.lease_token,
       t.last_error, t.enqueued_at, t.first_claimed_at, t.last_claimed_at, t.times_claimed,
       t.times_requeued, t.last_requeued_at, t.task_group AS "group", t.worker_id,
       t.trace_context, t.flow_id,
       CASE WHEN t.status = 'waiting' THEN t.waits END AS waits,
       CASE WHEN t.status <> 'available' OR t.exec_time <= coalesce(%(now)s::timestamptz, now())
            THEN t.status WHEN t.parked IS NULL THEN 'scheduled' ELSE 'parked' END AS state,
       CASE WHEN t.status = 'available' AND t.exec_time > coalesce(%(now)s::timestamptz, now())
            THEN t.parked END AS parked,
       t.wait_event, t.durable IS TRUE AS durable
