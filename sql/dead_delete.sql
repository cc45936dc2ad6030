-- Delete dead tasks by id (a dead letter someone chose to drop): each id is looked
-- up within its bucket; tasks that are not dead are left alone.
DELETE FROM shardq.tasks AS t
WHERE t.{bucket} = ANY(%(buckets)s::int2[])
  AND t.id = ANY(%(ids)s::uuid[])
  AND t.status = 'dead'
RETURNING t.id
