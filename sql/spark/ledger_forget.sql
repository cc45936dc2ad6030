-- Forget the ledger id of a stream's previous micro-batch: Spark runs batch n only
-- after it committed batch n - 1 to the checkpoint, so batch n - 1 never runs again.
DELETE FROM shardq.spark_ledger WHERE id = %(id)s::uuid
