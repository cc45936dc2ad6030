-- Give back %(n)s rate tokens that a claim spent (rate_take) but did not use: it found
-- fewer tasks or free slots.  A claim whose reply was lost never gets here, so its
-- unused tokens stay spent: the rate may go under-used, never over.
UPDATE shardq.queues
SET rate_tat = rate_tat - %(n)s * (rate_period_s / rate_count) * interval '1 second'
WHERE name = %(queue)s AND rate_count IS NOT NULL AND rate_tat IS NOT NULL
