-- The running tasks that count against the queue's max_running (free_slots).
-- Unqualified, so that it reads the tasks row of the subquery it is in.
queue = %(queue)s AND status = 'locked'
