-- Count tasks written by COPY or a multi-row INSERT, in the batch's transaction.
WITH n AS (SELECT %(queue)s::text AS queue, %(count)s::int8 AS enqueued, 0::int8 AS completed)
{throughput_add}
