-- A group's claim made without spending any rate tokens takes nothing once the queue
-- has a rate or a rate per group (see rate_unset).
AND NOT EXISTS (
          SELECT 1 FROM shardq.queues AS rated
          WHERE rated.name = %(queue)s
            AND (rated.rate_count IS NOT NULL OR rated.rate_per_group_count IS NOT NULL))
