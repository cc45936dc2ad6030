-- A claim made without spending rate tokens takes nothing once the queue has a rate:
-- the worker that chose it has not yet learnt of the rate (one probe per statement).
AND NOT EXISTS (
          SELECT 1 FROM shardq.queues AS rated
          WHERE rated.name = %(queue)s AND rated.rate_count IS NOT NULL)
