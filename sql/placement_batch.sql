-- The placement shared by a batch enqueued with the same options, read at the start of
-- the batch's transaction; the same statement counts the batch's tasks (throughput_add)
-- and, where the engine has it, queues the wake-up for idle workers (batch_notify),
-- which saves two round trips per batch.  Count and wake-up commit or roll back with
-- the batch.
WITH n AS (
    SELECT %(queue)s::text AS queue, %(count)s::int8 AS enqueued, 0::int8 AS completed
), counted AS (
    {throughput_add}
)
SELECT p.exec_time, p.pending_head_start_s, p.now, {notified} AS notified
FROM ({source}) AS src CROSS JOIN LATERAL ({placement}) AS p
