-- Retention: delete a bounded batch of sessions past their absolute expiry
-- (sessions_expiry); an idle one is refused at once and deleted here once it expires.
DELETE FROM shardq.sessions
WHERE id = ANY(ARRAY(
    SELECT s.id FROM shardq.sessions AS s
    WHERE s.expires_at <= coalesce(%(now)s::timestamptz, now())
    ORDER BY s.expires_at
    LIMIT {limit}))
RETURNING id
