-- Keep leases alive: each lease now ends by_s seconds from now (never earlier
-- than it did).  The lease expiry is the row's exec_time; the caller gets the new
-- value back (and, on CockroachDB, whose shard hashes the whole key, the row's new
-- bucket).  Run twice, it changes nothing more: the statement may be retried.
UPDATE shardq.tasks AS t SET
    exec_time = greatest(t.exec_time, c.now + a.by_s * interval '1 second')
FROM unnest(%(ids)s::uuid[], %(tokens)s::uuid[], %(by_s)s::float8[])
         AS a(id, lease_token, by_s),
     (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
{locate}
RETURNING t.id, t.exec_time, t.{bucket}
