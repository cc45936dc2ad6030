-- Spend up to %(want)s of one group's rate tokens under the queue's rate_per_group,
-- as rate_take does for the queue (the state lives in the group's shardq.groups
-- row, which group_row makes).  No row when the queue has no rate per group.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamptz, now()) AS now
), cur AS (
    SELECT g.queue, g.name, clock.now,
           greatest(coalesce(g.rate_tat, clock.now), clock.now) AS base,
           q.rate_per_group_period_s / q.rate_per_group_count AS step_s,
           coalesce(q.rate_per_group_burst, 1) AS burst
    FROM shardq.groups AS g
    JOIN shardq.queues AS q ON q.name = g.queue, clock
    WHERE g.queue = %(queue)s AND g.name = %(group)s AND q.rate_per_group_count IS NOT NULL
    FOR UPDATE OF g
), granted AS (
    {rate_granted}
)
UPDATE shardq.groups AS g
SET rate_tat = x.base + x.n * x.step_s * interval '1 second'
FROM granted AS x
WHERE g.queue = x.queue AND g.name = x.name
RETURNING x.n,
          greatest(0, extract(epoch FROM x.base - x.now) - (x.burst - 1) * x.step_s)::float8
