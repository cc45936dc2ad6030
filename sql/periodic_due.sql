-- The time now, and the state of the named schedules that have not been removed (one
-- row with null schedule columns when there is none).
SELECT c.now, p.name, p.cron, p.every_s, p.tz, p.missed, p.since, p.last_slot
FROM (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
LEFT JOIN shardq.periodic AS p ON p.name = ANY(%(names)s) AND p.removed_at IS NULL
ORDER BY p.name
