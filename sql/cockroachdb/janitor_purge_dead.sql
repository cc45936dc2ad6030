-- Retention: delete a bounded batch of one bucket's tasks that have been dead
-- longer than dead_retention_s (CockroachDB deletes with a LIMIT directly).
DELETE FROM shardq.tasks
WHERE {bucket} = %(bucket)s
  AND status = 'dead'
  AND exec_time <= coalesce(%(now)s::timestamptz, now())
                   - %(dead_retention_s)s::float8 * interval '1 second'
LIMIT {limit}
RETURNING id, 'purged'
