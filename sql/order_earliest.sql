-- Earliest first (tasks_list's default order).
ASC
