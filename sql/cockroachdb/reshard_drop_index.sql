-- An index of a layout no longer in use: an online schema change.  The claim index goes
-- last, after the two led by its shard column.
DROP INDEX IF EXISTS shardq.tasks@{index}
