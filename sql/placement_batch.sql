-- The placement shared by a batch enqueued with the same options, read at the start of
-- the batch's transaction; the same statement counts the batch's tasks (throughput_add),
-- which saves a round trip per batch.  The count commits or rolls back with the batch.
WITH n AS (
    SELECT %(queue)s::text AS queue, %(count)s::int8 AS enqueued, 0::int8 AS completed
), counted AS (
    {throughput_add}
)
SELECT p.exec_time, p.pending_head_start_s, p.now
FROM ({source}) AS src CROSS JOIN LATERAL ({placement}) AS p
