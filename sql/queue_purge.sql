-- Delete a bounded batch of one queue's waiting tasks (due or scheduled) in one
-- bucket: one range of the primary key, (bucket, queue, 'available'), never other
-- queues' rows nor running ones.  Rows another statement holds are skipped; the
-- delete re-checks the status, so a task claimed meanwhile is left alone.
DELETE FROM shardq.tasks
WHERE id IN (
    SELECT id FROM shardq.tasks
    WHERE {bucket} = %(bucket)s AND queue = %(queue)s AND status = 'available'
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED)
  AND status = 'available'
RETURNING id
