-- The schema changes running on shardq.tasks (CockroachDB's jobs): what each does, its
-- status, and the share done (in hundredths, as blocks of 100).
SELECT left(description, 80) AS index, status AS phase,
       (coalesce(fraction_completed, 0) * 100)::int8 AS blocks_done, 100::int8 AS blocks_total,
       0::int8 AS tuples_done, 0::int8 AS tuples_total
FROM [SHOW JOBS]
WHERE job_type LIKE '%%SCHEMA CHANGE%%' AND status = 'running'
  AND description LIKE '%%shardq%%tasks%%'
