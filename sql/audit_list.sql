-- The audit trail, newest first, from before a time (a page's last row), filtered by
-- who, what and which queue: a backward walk of audit_at that stops at the limit (a
-- filter that matches few rows walks further; the table holds audit_keep_s of them).
SELECT at, actor, role, via, action, queue, task_id, params, outcome, detail, address
FROM shardq.audit
WHERE at < coalesce(%(before)s::timestamptz, 'infinity')
  AND (%(actor)s::text IS NULL OR actor = %(actor)s)
  AND (%(action)s::text IS NULL OR action = %(action)s)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
ORDER BY at DESC
LIMIT {limit}
