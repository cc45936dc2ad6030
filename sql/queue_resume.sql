-- Resume a queue: its row goes, so that a queue with no tasks left is no longer listed
-- (queue_names).  Returns the row's paused_at, NULL for a row left by a resume of an
-- older release; no row when the queue had none.  (CockroachDB's workers poll: they
-- find the queue's tasks at their next visit of each bucket.)
DELETE FROM shardq.queues WHERE name = %(queue)s
RETURNING paused_at
