-- The layout row as a reshard sees it: the layout in use, the phase of a reshard under
-- way, its target (while building), the layout it replaced (until that is dropped),
-- and how long ago the phase began.
SELECT l.bucket_count, l.expression, l.generation, l.phase, l.target, l.retired_count,
       l.retired_expression, extract(epoch FROM now() - l.changed_at)::float8 AS phase_s
FROM shardq.layout AS l
