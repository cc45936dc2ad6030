-- Every live worker claims with the new generation: the old layout is dropped next.
UPDATE shardq.layout
SET phase = 'retire', changed_at = now()
WHERE phase = 'switch' AND generation = %(generation)s::int8
