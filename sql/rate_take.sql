-- Spend up to %(want)s of a queue's rate tokens (the generic cell rate algorithm):
-- each claim moves the theoretical arrival time rate_tat on by one emission interval
-- (period ÷ count), and a claim may run ahead of now by at most `burst` intervals.
-- So claims come evenly spread, never more than burst + count × t ÷ period in any
-- span t (1e-9 absorbs rounding: 0.4 / 0.1 is 3.999… in floating point).  The row
-- is locked (FOR UPDATE: under READ COMMITTED the newest version is read), for this
-- statement only.  Returns how many were granted and, when none,
-- how long until the next one; no row when the queue has no rate.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamptz, now()) AS now
), cur AS (
    SELECT q.name, clock.now,
           greatest(coalesce(q.rate_tat, clock.now), clock.now) AS base,
           q.rate_period_s / q.rate_count AS step_s, coalesce(q.rate_burst, 1) AS burst
    FROM shardq.queues AS q, clock
    WHERE q.name = %(queue)s AND q.rate_count IS NOT NULL
    FOR UPDATE OF q
), granted AS (
    {rate_granted}
)
UPDATE shardq.queues AS q
SET rate_tat = g.base + g.n * g.step_s * interval '1 second'
FROM granted AS g
WHERE q.name = g.name
RETURNING g.n,
          greatest(0, extract(epoch FROM g.base - g.now) - (g.burst - 1) * g.step_s)::float8
