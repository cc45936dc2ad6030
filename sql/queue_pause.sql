-- Pause a queue: claims of it take nothing until it is resumed, or until `until` when
-- given (NULL: an open-ended pause, which also lifts an earlier pause's end).  Pausing
-- a paused queue keeps the time it was first paused; a pause that had ended counts as
-- none.  Returns that time.
INSERT INTO shardq.queues AS q (name, paused_at, paused_until)
VALUES (%(queue)s, coalesce(%(now)s::timestamptz, now()), %(until)s::timestamptz)
ON CONFLICT (name) DO UPDATE SET
    paused_at = CASE WHEN q.paused_at IS NOT NULL
                          AND (q.paused_until IS NULL OR q.paused_until > EXCLUDED.paused_at)
                     THEN q.paused_at ELSE EXCLUDED.paused_at END,
    paused_until = EXCLUDED.paused_until
RETURNING q.paused_at
