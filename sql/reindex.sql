-- Rebuild one index of shardq.tasks without blocking claims (not in a transaction block).
REINDEX INDEX CONCURRENTLY {index}
