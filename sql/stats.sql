-- One queue's tasks by state, counted per bucket with a cap: each count reads at most
-- "limit" entries of one range of the primary key, (bucket, queue, status), so the
-- statement's cost is bounded by buckets x cap whatever the queue holds.  A bucket
-- whose count reached the cap says only "at least this many" (shardq.stats then
-- estimates).  The first 32 tasks in line of each bucket (the index's order) give
-- their wait: since their exec_time, and since their place in line without a
-- priority head start (which a task placed by enqueue got, and a requeued one not).
-- The tasks not yet due are scheduled and parked ones alike (shardq.ops.parkedstats
-- tells them apart).
SELECT b.bucket, due.n AS available, later.n AS later, held.n AS locked, gone.n AS dead,
       head.oldest_s, head.lag_s, head.last_wait_s, head.n AS head_read
FROM generate_series(0, %(bucket_count)s - 1) AS b(bucket)
CROSS JOIN (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
CROSS JOIN LATERAL (
    SELECT count(*) AS n FROM (
        SELECT 1 FROM shardq.tasks AS t
        WHERE t.{bucket} = b.bucket AND t.queue = %(queue)s AND t.status = 'available'
          AND t.exec_time <= c.now
        LIMIT {limit}) AS r
) AS due
CROSS JOIN LATERAL (
    SELECT max(r.wait_s) AS oldest_s, max(r.wait_s - r.head_start_s) AS lag_s,
           min(r.wait_s) AS last_wait_s, count(*) AS n
    FROM (SELECT extract(epoch FROM c.now - t.exec_time)::float8 AS wait_s,
                 CASE WHEN t.times_requeued = 0
                      THEN greatest(t.priority - t.pending_head_start_s, 0) ELSE 0 END
                     AS head_start_s
          FROM shardq.tasks AS t
          WHERE t.{bucket} = b.bucket AND t.queue = %(queue)s AND t.status = 'available'
            AND t.exec_time <= c.now
          ORDER BY t.exec_time
          LIMIT 32) AS r
) AS head
CROSS JOIN LATERAL (
    SELECT count(*) AS n FROM (
        SELECT 1 FROM shardq.tasks AS t
        WHERE t.{bucket} = b.bucket AND t.queue = %(queue)s AND t.status = 'available'
          AND t.exec_time > c.now
        LIMIT {limit}) AS r
) AS later
CROSS JOIN LATERAL (
    SELECT count(*) AS n FROM (
        SELECT 1 FROM shardq.tasks AS t
        WHERE t.{bucket} = b.bucket AND t.queue = %(queue)s AND t.status = 'locked'
        LIMIT {limit}) AS r
) AS held
CROSS JOIN LATERAL (
    SELECT count(*) AS n FROM (
        SELECT 1 FROM shardq.tasks AS t
        WHERE t.{bucket} = b.bucket AND t.queue = %(queue)s AND t.status = 'dead'
        LIMIT {limit}) AS r
) AS gone
