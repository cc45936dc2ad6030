-- Delete finished tasks, each only if its lease token still matches.
DELETE FROM shardq.tasks AS t
USING unnest(%(buckets)s::int2[], %(queues)s::text[], %(exec_times)s::timestamptz[],
             %(ids)s::uuid[], %(tokens)s::uuid[]) AS a(bucket, queue, exec_time, id, lease_token)
{locate}
RETURNING t.id
