-- Delete the dead tasks of one queue that died more than older_than_s ago.
DELETE FROM shardq.tasks AS t
USING (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
WHERE t.{bucket} = ANY(%(buckets)s::int2[])
  AND t.queue = %(queue)s
  AND t.status = 'dead'
  AND t.exec_time <= c.now - %(older_than_s)s::float8 * interval '1 second'
RETURNING t.id
