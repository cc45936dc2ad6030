-- An index of a layout no longer in use (or one an interrupted build left invalid),
-- dropped without blocking writers.
DROP INDEX CONCURRENTLY IF EXISTS shardq.{index}
