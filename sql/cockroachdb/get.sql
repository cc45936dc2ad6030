-- One task by id.  CockroachDB's shard is a hash of the whole key, so an id
-- alone cannot name its bucket: this reads the table (an admin operation).
SELECT {task_columns}
FROM shardq.tasks AS t
WHERE t.id = %(id)s::uuid
