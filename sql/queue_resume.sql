-- Resume a paused queue; returns its name if it was paused.  (CockroachDB's workers
-- poll: they find the queue's tasks at their next visit of each bucket.)
UPDATE shardq.queues SET paused_at = NULL
WHERE name = %(queue)s AND paused_at IS NOT NULL
RETURNING name
