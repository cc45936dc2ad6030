-- A layout's claim index on CockroachDB: the primary key's columns in a hash-sharded
-- secondary index of the layout's bucket count, whose hidden shard column
-- (crdb_internal_exec_time_id_queue_status_shard_N) the layout's claims name.
-- An online schema change: reads and writes go on while it backfills.
CREATE INDEX IF NOT EXISTS {index} ON shardq.tasks (queue, status, exec_time, id)
    USING HASH WITH (bucket_count = {count})
