-- Resume a queue: its row goes, so that a queue with no tasks left is no longer listed
-- (queue_names).  Returns the row's paused_at, NULL for a row left by a resume of an
-- older release; no row when the queue had none.  Workers LISTENing on channel
-- 'shardq' hear the name of a queue that was paused at commit, and look at every
-- bucket of it at once instead of at their next poll.
WITH gone AS (
    DELETE FROM shardq.queues WHERE name = %(queue)s
    RETURNING name, paused_at
)
SELECT gone.paused_at,
       (SELECT pg_notify('shardq', gone.name) WHERE gone.paused_at IS NOT NULL) AS notified
FROM gone
