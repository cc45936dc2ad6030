-- shardq doctor: the oldest transaction holding a snapshot (it holds back every vacuum
-- of the database): its age in seconds and its process id; and whether this role sees
-- other roles' sessions whole (pg_read_all_stats: a transaction's start is hidden
-- otherwise, so another role's old transaction would go unseen).
SELECT coalesce(max(extract(epoch FROM now() - xact_start)), 0) AS age_s,
       (array_agg(pid ORDER BY xact_start))[1] AS pid,
       pg_has_role('pg_read_all_stats', 'USAGE') AS sees_all,
       current_user AS role
FROM pg_stat_activity
WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid()
