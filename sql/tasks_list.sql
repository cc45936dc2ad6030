-- Up to `limit` tasks of one queue in one status whose exec_time lies in
-- (after, before], in exec_time order: earliest first, or latest first where the
-- order fragment is order_latest: one range scan of (bucket, queue, status, exec_time)
-- per bucket, forward or backward, merged.  exec_time is when a waiting task is due,
-- when a running task's lease runs out, and when a dead task died.
SELECT d.*
FROM generate_series(0, %(bucket_count)s::int4 - 1) AS b(n)
CROSS JOIN LATERAL (
    SELECT {task_columns}
    FROM shardq.tasks AS t
    WHERE t.{bucket} = b.n AND t.queue = %(queue)s AND t.status = %(status)s
      AND t.exec_time > coalesce(%(after)s::timestamptz, '-infinity')
      AND t.exec_time <= coalesce(%(before)s::timestamptz, 'infinity')
    ORDER BY t.exec_time {order}
    LIMIT %(limit)s
) AS d
ORDER BY d.exec_time {order}
LIMIT %(limit)s
