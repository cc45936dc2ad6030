-- The tasks of shardq.tasks as shardq.spark.read_tasks reads them (its documented
-- columns), the dbtable of Spark's JDBC reader.  Spark selects from this subquery and
-- adds each partition's range of bucket and the pushed-down filters (queue, status,
-- state); the planner moves them inside, onto tasks_pkey (bucket, queue, status, ...),
-- so each partition reads one bounded index range.  A due available task is
-- 'available', one not due yet 'scheduled'; a dead task died at its exec_time.
(SELECT t.{bucket} AS bucket, t.id::text AS id, t.queue, t.status,
        CASE WHEN t.status = 'available' AND t.exec_time > now() THEN 'scheduled'
             ELSE t.status END AS state,
        t.payload::text AS payload, t.key, t.priority, t.attempts, t.max_attempts,
        t.last_error, NULL::text AS result, t.enqueued_at, t.exec_time,
        t.first_claimed_at, t.last_claimed_at,
        CASE WHEN t.status = 'dead' THEN t.exec_time END AS finished_at
 FROM shardq.tasks AS t) AS shardq_tasks
