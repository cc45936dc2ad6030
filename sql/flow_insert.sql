-- Nodes of a flow, one row each from parallel arrays (shardq.ops.graphs): a node that
-- waits for others is 'waiting', with waits the count it waits for and flow_deps the
-- nodes whose results it takes, in order; flow_next names the nodes that wait for it.
-- Placed as any task is (placement); a node that waits keeps its place in line and
-- is claimed once it is released.  Counted as enqueued (throughput_add).  No row
-- coalesces: a node of a flow takes no key.
WITH src AS (
    SELECT r.id, r.queue, r.payload, r.run_at, r.delay_s, r.priority, r.max_attempts,
           r.task_group, r.waits, r.next, r.deps
    FROM unnest(%(ids)s::uuid[], %(queues)s::text[], %(payloads)s::jsonb[],
                %(run_ats)s::timestamptz[], %(delays_s)s::float8[], %(priorities)s::int4[],
                %(max_attempts)s::int4[], %(groups)s::text[], %(waits)s::int4[],
                %(nexts)s::text[], %(deps)s::text[])
         AS r(id, queue, payload, run_at, delay_s, priority, max_attempts, task_group, waits,
              next, deps)
), ins AS (
    INSERT INTO shardq.tasks AS t
        (id, queue, status, payload, exec_time, priority, pending_head_start_s, max_attempts,
         enqueued_at, task_group, trace_context, flow_id, waits, flow_next, flow_deps)
    SELECT src.id, src.queue, CASE WHEN src.waits > 0 THEN 'waiting' ELSE 'available' END,
           src.payload, p.exec_time, src.priority, p.pending_head_start_s, src.max_attempts,
           p.now, src.task_group, %(trace_context)s::text, %(flow_id)s::uuid,
           nullif(src.waits, 0), src.next::uuid[], src.deps::uuid[]
    FROM src CROSS JOIN LATERAL ({placement}) AS p
    RETURNING t.queue, t.status
), n AS (
    SELECT ins.queue, count(*) AS enqueued, 0::int8 AS completed FROM ins GROUP BY ins.queue
), counted AS (
    {throughput_add}
)
SELECT ins.queue, {flow_notify} FROM ins WHERE ins.status = 'available' GROUP BY ins.queue
