-- Retention: delete a bounded batch of the audit trail's rows older than audit_keep_s,
-- oldest first (audit_at).
DELETE FROM shardq.audit
WHERE id = ANY(ARRAY(
    SELECT a.id FROM shardq.audit AS a
    WHERE a.at < coalesce(%(now)s::timestamptz, now()) - %(keep_s)s * interval '1 second'
    ORDER BY a.at
    LIMIT {limit}))
RETURNING id
