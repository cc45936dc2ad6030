-- Mark removed the schedules on the given queues that are not among the given names
-- (the ones the consuming app no longer defines): they stop firing.
UPDATE shardq.periodic
SET removed_at = coalesce(%(now)s::timestamptz, now())
WHERE removed_at IS NULL AND queue = ANY(%(queues)s) AND NOT (name = ANY(%(names)s))
RETURNING name
