-- Enqueue one task (CockroachDB has no NOTIFY: its workers poll), and count it
-- (throughput_add) in the same statement.
WITH ins AS (
    {insert_one}
), n AS (
    SELECT %(queue)s::text AS queue, count(*) AS enqueued, 0::int8 AS completed FROM ins
), counted AS (
    {throughput_add}
)
SELECT ins.id FROM ins
