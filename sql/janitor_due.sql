-- The buckets a janitor pass has work in, of those listed: for each, whether a lease
-- expired (one probe of its range of the partial index tasks_leases) and whether a
-- scheduled task's head start came due (tasks_head_starts).  One statement probes
-- every bucket, so an idle queue's pass costs it alone, not three statements a bucket.
SELECT listed.bucket,
       EXISTS (SELECT 1 FROM shardq.tasks
               WHERE {bucket} = listed.bucket
                 AND status = 'locked'
                 AND exec_time <= coalesce(%(now)s::timestamptz, now())) AS expired,
       EXISTS (SELECT 1 FROM shardq.tasks
               WHERE {bucket} = listed.bucket
                 AND pending_head_start_s > 0
                 AND status = 'available'
                 AND exec_time <= coalesce(%(now)s::timestamptz, now())) AS head_starts
FROM unnest(%(buckets)s::int4[]) AS listed(bucket)
