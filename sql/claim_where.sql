-- The tasks a claim may take: one queue's eligible tasks of one index range
-- (claim_range: by default one bucket's, (bucket, queue, 'available', exec_time <= now)
-- of the primary key; a flow-controlled claim reads one group's or the ungrouped ones).
-- A keyed task waits while a task of its key runs (its follow-up): the check probes
-- the small index tasks_running_keys and unkeyed tasks skip it.  OFFSET 0 keeps the
-- planner from turning the probe into a hash of every running key.
-- A paused queue hands out nothing until its pause ends (paused_until passed, if set:
-- no one needs to resume it): the check names no column of the row, so it is
-- evaluated once per statement (an InitPlan on PostgreSQL, one probe of
-- shardq.queues' primary key), and when it fails the range is never read.  So is the
-- layout's generation (layout_guard).
{claim_range}
      {layout_guard}
      AND NOT EXISTS (
          SELECT 1 FROM shardq.queues AS paused
          WHERE paused.name = %(queue)s AND paused.paused_at IS NOT NULL
            AND (paused.paused_until IS NULL
                 OR paused.paused_until > coalesce(%(now)s::timestamptz, now())))
      AND (key IS NULL OR NOT EXISTS (
          SELECT 1 FROM shardq.tasks AS r
          WHERE r.queue = %(queue)s AND r.key = tasks.key AND r.status = 'locked'
          OFFSET 0))
