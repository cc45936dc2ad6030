-- The old layout is gone: the reshard is over.
UPDATE shardq.layout
SET phase = 'done', retired_count = NULL, retired_expression = NULL, changed_at = now()
WHERE phase = 'retire'
