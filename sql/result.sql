-- What became of one task (shardq.ops.results): its kept result, or where its row is
-- now.  One probe of results_pkey and one of tasks_ids.  A result past its expiry
-- counts as gone, whether or not the janitor has deleted it yet.
SELECT 'succeeded' AS status, r.queue, r.value, r.error, r.attempts, r.enqueued_at,
       r.finished_at
FROM shardq.results AS r
WHERE r.id = %(id)s::uuid
  AND r.expires_at > coalesce(%(now)s::timestamptz, now())
UNION ALL
SELECT CASE t.status WHEN 'locked' THEN 'running' WHEN 'dead' THEN 'failed'
                     ELSE 'pending' END,
       t.queue, NULL::jsonb, CASE WHEN t.status = 'dead' THEN t.last_error END,
       t.attempts, t.enqueued_at, CASE WHEN t.status = 'dead' THEN t.exec_time END
FROM shardq.tasks AS t
WHERE t.id = %(id)s::uuid
