-- Retention of attempts: delete a bounded batch of those that ended more than
-- attempts_retention_s ago, read from the index attempts_ended (CockroachDB deletes
-- with a LIMIT directly).
DELETE FROM shardq.attempts
WHERE ended_at <= coalesce(%(now)s::timestamptz, now())
                  - %(attempts_retention_s)s::float8 * interval '1 second'
LIMIT {limit}
RETURNING task_id
