-- The janitor clears the pauses whose paused_until passed.  Claims hand out those
-- queues' tasks from that time on already (claim_where): this tidies the rows as a
-- resume would (limits_tidy then removes each one left with no limits).  Returns the
-- queues' names.  shardq.queues holds a row per paused or limited queue: a few.
UPDATE shardq.queues SET paused_at = NULL, paused_until = NULL
WHERE paused_until <= coalesce(%(now)s::timestamptz, now())
RETURNING name
