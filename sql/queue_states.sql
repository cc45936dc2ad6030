-- The paused queues, when each was paused and until when (NULL: until resumed).  A
-- pause whose paused_until passed has ended: the janitor clears it (pauses_ended).
SELECT name, paused_at, paused_until FROM shardq.queues
WHERE paused_at IS NOT NULL
  AND (paused_until IS NULL OR paused_until > coalesce(%(now)s::timestamptz, now()))
ORDER BY name
