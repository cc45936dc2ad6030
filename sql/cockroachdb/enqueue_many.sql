-- Insert a batch of tasks in one statement (CockroachDB takes no binary COPY).  A
-- retry after a lost reply finds the ids taken and inserts nothing twice.
INSERT INTO shardq.tasks
    (id, queue, payload, exec_time, priority, pending_head_start_s, max_attempts, enqueued_at)
SELECT r.id, %(queue)s, r.payload, %(exec_time)s, %(priority)s, %(pending_head_start_s)s,
       %(max_attempts)s, %(now)s
FROM unnest(%(ids)s::uuid[], %(payloads)s::jsonb[]) AS r(id, payload)
ON CONFLICT (id) DO NOTHING
