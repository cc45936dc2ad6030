-- The buckets a janitor pass has work in, of those listed: for each, whether a lease
-- expired (one probe of its span of the partial index tasks_leases) and whether a
-- scheduled task's head start came due (tasks_head_starts), each index named as the
-- janitor's statements name it.  One statement probes every bucket.
SELECT listed.bucket,
       EXISTS (SELECT 1 FROM shardq.tasks@tasks_leases
               WHERE {bucket} = listed.bucket
                 AND status = 'locked'
                 AND exec_time <= coalesce(%(now)s::timestamptz, now())) AS expired,
       EXISTS (SELECT 1 FROM shardq.tasks@tasks_head_starts
               WHERE {bucket} = listed.bucket
                 AND pending_head_start_s > 0
                 AND status = 'available'
                 AND exec_time <= coalesce(%(now)s::timestamptz, now())) AS head_starts
FROM unnest(%(buckets)s::INT8[]) AS listed(bucket)
