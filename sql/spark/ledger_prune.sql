-- Forget ids merged longer ago than a re-run of their job could come back.
DELETE FROM shardq.spark_ledger
WHERE merged_at < now() - %(older_than_s)s * interval '1 second'
