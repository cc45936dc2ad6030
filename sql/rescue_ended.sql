-- The attempts a lease-expiry rescue ended, from its CTE `rescued` (the rows as they
-- are after the rescue): the lease expired, or the task died of it.
SELECT r.id, r.queue, r.times_claimed AS attempt, r.last_claimed_at AS claimed_at,
           r.worker_id, CASE WHEN r.status = 'dead' THEN 'dead' ELSE 'lease_expired' END AS outcome,
           r.last_error AS error
    FROM rescued AS r
