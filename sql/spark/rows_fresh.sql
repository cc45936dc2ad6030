-- The rows of a staging table whose ids the ledger had not seen (the CTE fresh), as
-- insert_rows takes them: a row Spark wrote twice (a retried task) counts once, and
-- keyed rows are one per (queue, key), the last in the DataFrame's order.
SELECT r.id, r.queue, r.key, r.payload,
       timestamptz '1970-01-01 00:00:00+00' + r.run_at_us * interval '1 microsecond' AS run_at,
       NULL::float8 AS delay_s, r.priority, r.max_attempts
FROM (
    (SELECT DISTINCT ON (s.id) s.*
     FROM {stage} AS s
     WHERE s.key IS NULL AND s.id IN (SELECT f.id FROM fresh AS f)
     ORDER BY s.id, s.seq)
    UNION ALL
    (SELECT DISTINCT ON (s.queue, s.key) s.*
     FROM {stage} AS s
     WHERE s.key IS NOT NULL AND s.id IN (SELECT f.id FROM fresh AS f)
     ORDER BY s.queue, s.key, s.seq DESC)
) AS r
