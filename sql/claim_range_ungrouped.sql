-- One bucket's due ungrouped tasks of a flow-controlled queue that has no waiting
-- grouped tasks: the primary key's range, as claim_range.
{bucket} = %(bucket)s
      AND queue = %(queue)s
      AND status = 'available'
      AND exec_time <= coalesce(%(now)s::timestamptz, now())
      AND task_group IS NULL
      {rate_guard}
