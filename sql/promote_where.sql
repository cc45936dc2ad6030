-- Due scheduled tasks of one bucket that still have a priority head start to apply
-- (the partial index tasks_head_starts holds only such tasks).
{bucket} = %(bucket)s
      AND pending_head_start_s > 0
      AND status = 'available'
      AND exec_time <= coalesce(%(now)s::timestamptz, now())
