-- A queue with no limits left and no pause (or one whose paused_until passed) needs no
-- row (queue_names would list it).
DELETE FROM shardq.queues
WHERE name = %(queue)s
  AND (paused_at IS NULL OR paused_until <= coalesce(%(now)s::timestamptz, now()))
  AND max_running IS NULL
  AND max_running_per_group IS NULL AND rate_count IS NULL AND rate_per_group_count IS NULL
