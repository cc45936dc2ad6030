-- One bucket's due ungrouped tasks of a queue that also has waiting grouped tasks.
-- Both lie in one range of the primary key; grouped ones are claimed group by group
-- (claim_range_group), and this claim reads no further than the range's first
-- 4 × limit tasks, so a large grouped backlog costs each ungrouped turn a bounded
-- scan.  Ungrouped tasks behind more grouped ones than that wait until those drain.
{bucket} = %(bucket)s
      AND queue = %(queue)s
      AND status = 'available'
      AND exec_time <= coalesce(%(now)s::timestamptz, now())
      AND exec_time <= coalesce((
          SELECT ahead.exec_time FROM shardq.tasks AS ahead
          WHERE ahead.{bucket} = %(bucket)s AND ahead.queue = %(queue)s
            AND ahead.status = 'available'
          ORDER BY ahead.exec_time OFFSET 4 * {limit} LIMIT 1), 'infinity')
      AND task_group IS NULL
      {rate_guard}
