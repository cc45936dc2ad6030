-- The paused queues and when each was paused.
SELECT name, paused_at FROM shardq.queues WHERE paused_at IS NOT NULL ORDER BY name
