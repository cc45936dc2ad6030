-- shardq doctor: the oldest transaction holding a snapshot (it holds back every vacuum
-- of the database): its age in seconds and its process id.
SELECT coalesce(max(extract(epoch FROM now() - xact_start)), 0) AS age_s,
       (array_agg(pid ORDER BY xact_start))[1] AS pid
FROM pg_stat_activity
WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid()
