-- The rows of a staging table that the ledger took now (the CTE fresh; the is_new
-- fragment tells which: new_ids, a row whose own id is new, or new_batch, every row of a
-- micro-batch whose id is new), as insert_rows takes them: a row Spark wrote twice (a
-- retried task) counts once, and keyed rows are one per (queue, key), the last in the
-- DataFrame's order.
SELECT r.id, r.queue, r.key, r.payload,
       timestamptz '1970-01-01 00:00:00+00' + r.run_at_us * interval '1 microsecond' AS run_at,
       NULL::float8 AS delay_s, r.priority, r.max_attempts, r.task_group, r.trace_context
FROM (
    (SELECT DISTINCT ON (s.id) s.*
     FROM {stage} AS s
     WHERE s.key IS NULL AND {is_new}
     ORDER BY s.id, s.seq)
    UNION ALL
    (SELECT DISTINCT ON (s.queue, s.key) s.*
     FROM {stage} AS s
     WHERE s.key IS NOT NULL AND {is_new}
     ORDER BY s.queue, s.key, s.seq DESC)
) AS r
