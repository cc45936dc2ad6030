-- Insert keyed tasks (or any batch given as rows) with coalescing; see insert_rows.
-- Every row counts as enqueued, coalesced or not (throughput_add).
WITH ins AS (
    {insert}
), n AS (
    SELECT %(queue)s::text AS queue, count(*) AS enqueued, 0::int8 AS completed FROM ins
), counted AS (
    {throughput_add}
)
SELECT ins.id, ins.key FROM ins
