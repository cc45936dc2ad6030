-- The columns of shardq.tasks that tell which engine layout is in place:
-- PostgreSQL's generated `bucket`, or CockroachDB's hidden shard column; and a row
-- named `layout` when the table shardq.layout (migration 0029) says which is in use.
SELECT CASE WHEN table_name = 'layout' THEN 'layout' ELSE column_name END AS column_name,
       coalesce(generation_expression, '') AS generation_expression
FROM information_schema.columns
WHERE table_schema = 'shardq'
  AND ((table_name = 'tasks'
        AND (column_name = 'bucket' OR column_name LIKE 'crdb_internal_%%_shard_%%'))
       OR (table_name = 'layout' AND column_name = 'generation'))
