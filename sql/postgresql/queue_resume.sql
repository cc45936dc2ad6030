-- Resume a queue: its pause is cleared, and its end if it had one (limits_tidy then
-- removes a row left with no limits, so that a queue with no tasks left is no longer
-- listed by queue_names).  Returns the row's paused_at, NULL for a queue that was not
-- paused (a pause whose paused_until passed had ended); no row when the queue had
-- none.  Workers LISTENing on channel 'shardq' hear the name of a queue that was
-- paused at commit, and look at every bucket of it at once instead of at their next
-- poll.
WITH old AS (
    SELECT name,
           CASE WHEN paused_until IS NULL
                     OR paused_until > coalesce(%(now)s::timestamptz, now())
                THEN paused_at END AS paused_at
    FROM shardq.queues WHERE name = %(queue)s FOR UPDATE
), resumed AS (
    UPDATE shardq.queues AS q SET paused_at = NULL, paused_until = NULL
    FROM old WHERE q.name = old.name
)
SELECT old.paused_at,
       (SELECT pg_notify('shardq', old.name) WHERE old.paused_at IS NOT NULL) AS notified
FROM old
