-- Give back %(n)s of a group's rate tokens (see rate_refund).
UPDATE shardq.groups AS g
SET rate_tat = g.rate_tat
    - %(n)s * (q.rate_per_group_period_s / q.rate_per_group_count) * interval '1 second'
FROM shardq.queues AS q
WHERE g.queue = %(queue)s AND g.name = %(group)s AND q.name = g.queue
  AND q.rate_per_group_count IS NOT NULL AND g.rate_tat IS NOT NULL
