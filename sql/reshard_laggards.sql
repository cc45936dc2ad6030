-- The live workers (seen within worker_stale_s) that do not yet claim with the layout's
-- generation: a reshard drops the old layout only once there are none.  A worker of a
-- shardq from before resharding reports no generation, and is waited for too.
SELECT w.name
FROM shardq.workers AS w, shardq.layout AS l
WHERE w.last_seen_at > now() - %(worker_stale_s)s * interval '1 second'
  AND (w.generation IS NULL OR w.generation < l.generation)
ORDER BY w.name
