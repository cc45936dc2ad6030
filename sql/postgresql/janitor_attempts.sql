-- Retention of attempts: delete a bounded batch of those that ended more than
-- attempts_retention_s ago, oldest first, read from the index attempts_ended.  Rows
-- another janitor is deleting are passed over.
WITH doomed AS MATERIALIZED (
    SELECT ctid
    FROM shardq.attempts
    WHERE ended_at <= coalesce(%(now)s::timestamptz, now())
                      - %(attempts_retention_s)s::float8 * interval '1 second'
    ORDER BY ended_at
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
)
DELETE FROM shardq.attempts
WHERE ctid = ANY(ARRAY(SELECT ctid FROM doomed))
RETURNING task_id
