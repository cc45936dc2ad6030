-- Whether the schema has the ledger of idempotent Spark writes (migration 0008).
SELECT count(*) FROM information_schema.tables
WHERE table_schema = 'shardq' AND table_name = 'spark_ledger'
