-- Resume a paused queue; returns its name if it was paused.  Workers LISTENing on
-- channel 'shardq' hear the queue's name at commit and look at every bucket of it
-- at once instead of at their next poll.
WITH resumed AS (
    UPDATE shardq.queues SET paused_at = NULL
    WHERE name = %(queue)s AND paused_at IS NOT NULL
    RETURNING name
)
SELECT resumed.name, (SELECT pg_notify('shardq', resumed.name)) AS notified
FROM resumed
