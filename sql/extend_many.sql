-- Keep leases alive: each lease now ends by_s seconds from now (never earlier
-- than it did).  The lease expiry is the row's exec_time, so the caller gets the
-- new value back to keep addressing the row (and, on CockroachDB, whose shard
-- hashes the whole key, the row's new bucket).
UPDATE shardq.tasks AS t SET
    exec_time = greatest(t.exec_time, c.now + a.by_s * interval '1 second')
FROM unnest(%(buckets)s::int2[], %(queues)s::text[], %(exec_times)s::timestamptz[],
            %(ids)s::uuid[], %(tokens)s::uuid[], %(by_s)s::float8[])
         AS a(bucket, queue, exec_time, id, lease_token, by_s),
     (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
{locate}
RETURNING t.id, t.exec_time, t.{bucket}
