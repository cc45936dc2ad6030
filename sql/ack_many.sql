-- Delete finished tasks, each only if its lease token still matches.
DELETE FROM shardq.tasks AS t
USING unnest(%(buckets)s::int2[], %(queues)s::text[], %(exec_times)s::timestamptz[],
             %(ids)s::uuid[], %(tokens)s::uuid[]) AS a(bucket, queue, exec_time, id, lease_token)
WHERE t.{bucket} = a.bucket
  AND t.queue = a.queue
  AND t.status = 'locked'
  AND t.exec_time = a.exec_time
  AND t.id = a.id
  AND t.lease_token = a.lease_token
RETURNING t.id
