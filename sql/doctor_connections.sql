-- shardq doctor: the server's connection limit, the part kept for superusers, and the
-- client connections open now.
SELECT current_setting('max_connections')::int AS max_connections,
       current_setting('superuser_reserved_connections')::int AS reserved,
       (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend') AS used
