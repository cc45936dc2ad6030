-- Drop an invalid copy that a REINDEX CONCURRENTLY cut short left behind.
DROP INDEX CONCURRENTLY IF EXISTS {index}
