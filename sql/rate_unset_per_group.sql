-- A group's claim that spent the queue's rate tokens but none of the group's takes
-- nothing once the queue has a rate per group (see rate_unset).
AND NOT EXISTS (
          SELECT 1 FROM shardq.queues AS rated
          WHERE rated.name = %(queue)s AND rated.rate_per_group_count IS NOT NULL)
