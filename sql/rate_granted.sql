-- How many of %(want)s tokens a rate grants (rate_take, group_rate_take): the CTE `cur`
-- holds the rate's state row as it is now (base: its theoretical arrival time, not
-- before now; step_s: the emission interval; burst), and the claim may run ahead of now
-- by at most burst intervals.
SELECT cur.*,
       least(%(want)s::int4, greatest(0, floor(
           (cur.burst * cur.step_s - extract(epoch FROM cur.base - cur.now)) / cur.step_s
           + 1e-9
       )))::int4 AS n
FROM cur
