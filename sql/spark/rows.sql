-- The rows of a staging table as insert_rows takes them: every unkeyed row, and one
-- row per (queue, key), the last in the DataFrame's order.
SELECT r.id, r.queue, r.key, r.payload,
       timestamptz '1970-01-01 00:00:00+00' + r.run_at_us * interval '1 microsecond' AS run_at,
       NULL::float8 AS delay_s, r.priority, r.max_attempts, r.task_group, r.trace_context
FROM (
    SELECT s.* FROM {stage} AS s WHERE s.key IS NULL
    UNION ALL
    (SELECT DISTINCT ON (s.queue, s.key) s.*
     FROM {stage} AS s
     WHERE s.key IS NOT NULL
     ORDER BY s.queue, s.key, s.seq DESC)
) AS r
