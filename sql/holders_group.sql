-- The running tasks that count against the claim's group's max_running_per_group
-- (free_slots).  Unqualified, so that it reads the tasks row of the subquery it is in.
queue = %(queue)s AND task_group = %(group)s AND status = 'locked'
