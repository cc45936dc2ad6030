-- The rows of a micro-batch's staging table, as insert_rows takes them, if the batch
-- is new to the ledger (the CTE fresh), else none: a row a retried Spark task wrote
-- twice counts once, and keyed rows are one per (queue, key), the last in the batch.
SELECT r.id, r.queue, r.key, r.payload,
       timestamptz '1970-01-01 00:00:00+00' + r.run_at_us * interval '1 microsecond' AS run_at,
       NULL::float8 AS delay_s, r.priority, r.max_attempts
FROM (
    (SELECT DISTINCT ON (s.id) s.*
     FROM {stage} AS s
     WHERE s.key IS NULL AND EXISTS (SELECT 1 FROM fresh)
     ORDER BY s.id, s.seq)
    UNION ALL
    (SELECT DISTINCT ON (s.queue, s.key) s.*
     FROM {stage} AS s
     WHERE s.key IS NOT NULL AND EXISTS (SELECT 1 FROM fresh)
     ORDER BY s.queue, s.key, s.seq DESC)
) AS r
