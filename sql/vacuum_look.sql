-- What the janitor's vacuum step decides on: shardq.tasks' dead and live rows, the
-- vacuums it has had, and whether this role may VACUUM and REINDEX it (its owner, a
-- member of the owning role, or a superuser; PostgreSQL 17+ also grants MAINTAIN).
SELECT s.n_dead_tup, s.n_live_tup, s.vacuum_count + s.autovacuum_count,
       pg_has_role(c.relowner, 'USAGE') AS owns,
       current_setting('server_version_num')::int AS version,
       pg_get_userbyid(c.relowner) AS owner, current_user AS role
FROM pg_class AS c
JOIN pg_stat_user_tables AS s ON s.relid = c.oid
WHERE c.oid = 'shardq.tasks'::regclass
