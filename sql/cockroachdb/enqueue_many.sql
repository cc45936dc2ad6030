-- Insert a batch of tasks in one statement (CockroachDB takes no binary COPY), and count
-- the rows it inserted (throughput_add).  A retry after a lost reply finds the ids
-- taken: it inserts nothing twice, and counts nothing twice.
WITH ins AS (
    INSERT INTO shardq.tasks
        (id, queue, payload, exec_time, priority, pending_head_start_s, max_attempts,
         enqueued_at, task_group, trace_context)
    SELECT r.id, %(queue)s, r.payload, %(exec_time)s, %(priority)s, %(pending_head_start_s)s,
           %(max_attempts)s, %(now)s, %(group)s::text, %(trace_context)s::text
    FROM unnest(%(ids)s::uuid[], %(payloads)s::jsonb[]) AS r(id, payload)
    ON CONFLICT (id) DO NOTHING
    RETURNING id
), n AS (
    SELECT %(queue)s::text AS queue, count(*) AS enqueued, 0::int8 AS completed FROM ins
), counted AS (
    {throughput_add}
)
SELECT count(*) FROM ins
