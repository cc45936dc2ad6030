-- Up to `limit` dead tasks of one queue that a redrive would make eligible again: those
-- that died in (after, before] (dead_match_bounds: exec_time is when a dead task died;
-- no after: no lower bound) and whose last error holds `error` whatever
-- its case (strpos takes no pattern: the wildcards of LIKE are plain characters in
-- it), oldest first within each bucket.  One range of (bucket, queue, 'dead',
-- exec_time) of the primary key per bucket (read in order, or as a bitmap where the
-- planner finds the range small), taken in turn until `limit` are found: the error is
-- a filter over that range.  A keyed task whose key has a waiting task is
-- left out, as dead_retry leaves it dead.  Returns each task's bucket, id and key.
SELECT b.n AS bucket, d.id, d.key
FROM generate_series(0, %(bucket_count)s::int4 - 1) AS b(n)
CROSS JOIN LATERAL (
    SELECT t.id, t.key
    FROM shardq.tasks AS t
    WHERE t.{bucket} = b.n AND t.queue = %(queue)s AND t.status = 'dead'
      AND t.exec_time <= %(before)s::timestamptz
      AND t.exec_time > coalesce(%(after)s::timestamptz, '-infinity')
      AND (%(error)s::text IS NULL OR strpos(lower(t.last_error), lower(%(error)s::text)) > 0)
      AND (t.key IS NULL OR NOT EXISTS (
          SELECT 1 FROM shardq.tasks AS w
          WHERE w.queue = t.queue AND w.key = t.key AND w.status = 'available'))
    ORDER BY t.exec_time
    LIMIT {limit}
) AS d
LIMIT {limit}
