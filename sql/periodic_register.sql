-- Register a periodic schedule, or bring its row up to date with the code.  A changed
-- expression or time zone, or a schedule that was removed and comes back, counts its
-- slots from now on (since): no slot that fell before the change fires.  last_slot is
-- kept, so a slot that fired is never fired again.
INSERT INTO shardq.periodic AS p
    (name, cron, every_s, tz, missed, task, queue, priority, max_attempts, since)
VALUES (%(name)s, %(cron)s, %(every_s)s, %(tz)s, %(missed)s, %(task)s, %(queue)s,
        %(priority)s, %(max_attempts)s, coalesce(%(now)s::timestamptz, now()))
ON CONFLICT (name) DO UPDATE SET
    since = CASE WHEN p.removed_at IS NOT NULL
                      OR p.cron IS DISTINCT FROM EXCLUDED.cron
                      OR p.every_s IS DISTINCT FROM EXCLUDED.every_s
                      OR p.tz <> EXCLUDED.tz
                 THEN greatest(p.since, EXCLUDED.since) ELSE p.since END,
    cron = EXCLUDED.cron,
    every_s = EXCLUDED.every_s,
    tz = EXCLUDED.tz,
    missed = EXCLUDED.missed,
    task = EXCLUDED.task,
    queue = EXCLUDED.queue,
    priority = EXCLUDED.priority,
    max_attempts = EXCLUDED.max_attempts,
    removed_at = NULL
RETURNING p.name
