-- One task by id.  CockroachDB's shard is a hash of the whole key, so an id
-- alone cannot name its bucket: this reads the table (an admin operation).
SELECT t.*,
       CASE WHEN t.status = 'available' AND t.exec_time > coalesce(%(now)s::timestamptz, now())
            THEN 'scheduled' ELSE t.status END AS state, t.{bucket} AS bucket
FROM shardq.tasks AS t
WHERE t.id = %(id)s::uuid
