-- A reshard rolled back before its switch: its indexes are gone, the layout in use
-- never changed.
UPDATE shardq.layout
SET phase = 'done', target = NULL, changed_at = now()
WHERE phase = 'build'
