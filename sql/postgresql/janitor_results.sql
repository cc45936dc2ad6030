-- Retention of results: delete a bounded batch of expired ones, oldest first, read
-- from the index results_expiry.  Rows another janitor is deleting are passed over.
WITH doomed AS MATERIALIZED (
    SELECT ctid
    FROM shardq.results
    WHERE expires_at <= coalesce(%(now)s::timestamptz, now())
    ORDER BY expires_at
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
)
DELETE FROM shardq.results
WHERE ctid = ANY(ARRAY(SELECT ctid FROM doomed))
RETURNING id
