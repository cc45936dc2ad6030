-- Every schedule, removed ones included, by name.
SELECT name, cron, every_s, tz, missed, task, queue, priority, max_attempts, since,
       last_slot, removed_at
FROM shardq.periodic
ORDER BY name
