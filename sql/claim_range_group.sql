-- One group's due tasks of a queue, oldest first: one range of the partial index
-- tasks_groups_waiting (queue, task_group, exec_time).
queue = %(queue)s
      AND task_group = %(group)s
      AND status = 'available'
      AND exec_time <= coalesce(%(now)s::timestamptz, now())
      {rate_guard}
