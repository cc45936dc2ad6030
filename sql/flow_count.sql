-- Add a fold's counts to its flows' rows: nodes that succeeded, that died (less those
-- that came back) and that were cancelled, and the events folded in (which a durable
-- task waiting for its children compares: park_many).
UPDATE shardq.flows AS f SET
    succeeded = f.succeeded + d.succeeded,
    dead = f.dead + d.dead,
    cancelled = f.cancelled + d.cancelled,
    folded = f.folded + d.folded
FROM unnest(%(flows)s::uuid[], %(succeeded)s::int8[], %(dead)s::int8[],
            %(cancelled)s::int8[], %(folded)s::int8[])
         AS d(id, succeeded, dead, cancelled, folded)
WHERE f.id = d.id
