-- The last `limit` tasks of one queue in one status whose exec_time lies in
-- (after, before], latest first: one backward range scan of (bucket, queue, status,
-- exec_time) per bucket, merged (the newest dead letters, the latest due tasks).
SELECT d.*
FROM generate_series(0, %(bucket_count)s::int4 - 1) AS b(n)
CROSS JOIN LATERAL (
    SELECT {task_columns}
    FROM shardq.tasks AS t
    WHERE t.{bucket} = b.n AND t.queue = %(queue)s AND t.status = %(status)s
      AND t.exec_time > coalesce(%(after)s::timestamptz, '-infinity')
      AND t.exec_time <= coalesce(%(before)s::timestamptz, 'infinity')
    ORDER BY t.exec_time DESC
    LIMIT %(limit)s
) AS d
ORDER BY d.exec_time DESC
LIMIT %(limit)s
