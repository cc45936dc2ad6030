-- One task by id.  The bucket is a function of the id alone (computed by the
-- caller, shardq.dialect), so the lookup stays within one bucket of the primary key.
SELECT {task_columns}
FROM shardq.tasks AS t
WHERE t.{bucket} = %(bucket)s
  AND t.id = %(id)s::uuid
