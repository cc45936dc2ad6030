-- The switch: claims use %(count)s buckets (an expression of the id, or a column) from
-- the next generation on, and the layout they used is kept as the one to retire.
-- Switching back (a rollback after the switch) is the same statement the other way.
-- Clients re-read the row within a second; claims of the old generation take nothing.
UPDATE shardq.layout
SET retired_count = bucket_count, retired_expression = expression,
    bucket_count = %(count)s::int4, expression = %(expression)s::bool,
    generation = generation + 1, phase = 'switch', target = NULL, changed_at = now()
WHERE generation = %(generation)s::int8
RETURNING generation
