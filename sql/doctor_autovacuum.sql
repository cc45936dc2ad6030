-- shardq doctor: whether autovacuum runs on the server, shardq.tasks' storage options
-- (autovacuum_enabled=false turns it off for the table alone), and the table's dead and
-- live rows with its last vacuum.
SELECT current_setting('autovacuum') = 'on' AS server_on,
       coalesce(c.reloptions, ARRAY[]::text[]) AS options,
       s.n_live_tup, s.n_dead_tup, greatest(s.last_autovacuum, s.last_vacuum) AS last_vacuum
FROM pg_class AS c
LEFT JOIN pg_stat_user_tables AS s ON s.relid = c.oid
WHERE c.oid = 'shardq.tasks'::regclass
