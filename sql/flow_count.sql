-- Add a fold's counts to its flows' rows: nodes that succeeded, that died (less those
-- that came back) and that were cancelled.
UPDATE shardq.flows AS f SET
    succeeded = f.succeeded + d.succeeded,
    dead = f.dead + d.dead,
    cancelled = f.cancelled + d.cancelled
FROM unnest(%(flows)s::uuid[], %(succeeded)s::int8[], %(dead)s::int8[],
            %(cancelled)s::int8[]) AS d(id, succeeded, dead, cancelled)
WHERE f.id = d.id
