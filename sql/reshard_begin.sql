-- A reshard towards %(target)s buckets begins: its indexes are built next.
UPDATE shardq.layout
SET phase = 'build', target = %(target)s::int4, changed_at = now()
WHERE phase = 'done'
